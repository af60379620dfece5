package dispatch

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneWayToBuildACall holds every way in to NewRequest: a Request
// literal outside this package (tests aside) would set who a call is for
// by hand, and the next field the pipeline needs would be forgotten there.
func TestOneWayToBuildACall(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(src, []byte("dispatch.Request")) {
			return err
		}
		found = append(found, requestLiterals(t, path, src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range found {
		t.Errorf("%s: a dispatch.Request literal; build the call with dispatch.NewRequest", at)
	}
}

// requestLiterals lists where a file writes a dispatch.Request literal.
func requestLiterals(t *testing.T, path string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
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
