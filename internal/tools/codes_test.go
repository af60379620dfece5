package tools_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

// TestCodesListsEveryCode: tools.Codes holds every constant of type Code
// declared in this package, each once, and no two constants share a value.
func TestCodesListsEveryCode(t *testing.T) {
	declared := declaredCodes(t)
	var listed []string
	seen := map[tools.Code]bool{}
	for _, c := range tools.Codes {
		if seen[c] {
			t.Errorf("Codes lists %q twice", c)
		}
		seen[c] = true
		listed = append(listed, string(c))
	}
	byValue := map[string]string{}
	var values []string
	for name, v := range declared {
		if prev, dup := byValue[v]; dup {
			t.Errorf("%s and %s are both %q", prev, name, v)
		}
		byValue[v] = name
		values = append(values, v)
	}
	slices.Sort(values)
	slices.Sort(listed)
	if d := cmp.Diff(values, listed); d != "" {
		t.Errorf("Codes differs from the declared constants (-declared +listed):\n%s", d)
	}
}

// TestCodesAreSnakeCase: a code is lower-case words joined by "_", as the
// envelope's other enumerations are.
func TestCodesAreSnakeCase(t *testing.T) {
	for _, c := range tools.Codes {
		s := string(c)
		if s == "" || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz_") != "" || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") {
			t.Errorf("code %q is not snake_case", s)
		}
	}
}

// declaredCodes parses this package's files for constants of type Code:
// name to value.
func declaredCodes(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				addCodeConsts(t, gd, out)
			}
		}
	}
	return out
}

func addCodeConsts(t *testing.T, gd *ast.GenDecl, out map[string]string) {
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
			continue
		}
		for i, n := range vs.Names {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				t.Fatalf("%s is not declared as a string literal", n.Name)
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			out[n.Name] = v
		}
	}
}
