package dispatch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/toold/toold/internal/srctest"
)

// TestOneWayToBuildACall holds every way in to NewRequest: a Request
// literal outside this package (tests aside) would set who a call is for
// by hand, and the next field the pipeline needs would be forgotten there.
func TestOneWayToBuildACall(t *testing.T) {
	for _, f := range srctest.ProductionFiles(t, filepath.Join("..", "..")) {
		for _, at := range requestLiterals(f.Fset, f.AST) {
			t.Errorf("%s: a dispatch.Request literal; build the call with dispatch.NewRequest", at)
		}
	}
}

// TestRequestLiteralCheckFinds: the check above flags a literal, bare or
// behind &, and leaves the constructor and other packages' Requests alone.
func TestRequestLiteralCheckFinds(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		found      int
	}{
		{"literal", `var _ = dispatch.Request{Tool: "echo"}`, 1},
		{"pointer", `var _ = &dispatch.Request{}`, 1},
		{"constructor", `var _ = dispatch.NewRequest("echo", nil, "r", dispatch.From{})`, 0},
		{"another package's Request", `var _ = http.Request{}`, 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package x\n"+tc.body+"\n", parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestLiterals(fset, f); len(got) != tc.found {
			t.Errorf("%s: found %v, want %d", tc.name, got, tc.found)
		}
	}
}

// requestLiterals lists where a file writes a dispatch.Request literal.
func requestLiterals(fset *token.FileSet, f *ast.File) []string {
	var at []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if sel, ok := lit.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Request" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "dispatch" {
				at = append(at, fset.Position(lit.Pos()).String())
			}
		}
		return true
	})
	return at
}
