package tools_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/toold/toold/internal/srctest"
)

// TestNoCodeLiteralsOutsideTools: production code outside package tools
// names an error code by its tools.Code constant, never as a bare string.
// An untyped string converts to tools.Code silently, so the type alone
// would let "not_fuond" through; this check is syntactic (it needs no
// build): a string literal where a code goes — a Code field, a comparison
// or switch on one, a tools.Code conversion, or an argument of any function
// whose parameter is a tools.Code (WithCode and the packages' own helpers).
func TestNoCodeLiteralsOutsideTools(t *testing.T) {
	root := filepath.Join("..", "..")
	files := srctest.ProductionFiles(t, root)
	params := codeParams(files)
	for _, f := range files {
		if filepath.Dir(f.Path) == filepath.Join(root, "internal", "tools") { // package tools declares the codes
			continue
		}
		for _, where := range codeLiterals(f, params) {
			t.Errorf("%s: an error code written as a string literal; use its tools.Code constant (internal/tools/codes.go)", where)
		}
	}
}

// TestCodeLiteralCheckFinds: the check above flags each way a literal
// code can be written, and leaves constants and non-code strings alone.
func TestCodeLiteralCheckFinds(t *testing.T) {
	const helper = `package p
func refuse(code tools.Code, msg string) *tools.Error { return nil }
func (e *Error) WithCode(code Code) *Error { return e }
`
	for _, tt := range []struct {
		name, body string
		found      int
	}{
		{"field", `var _ = tools.Error{Code: "conflict"}`, 1},
		{"with code", `var _ = e.WithCode("conflict")`, 1},
		{"helper", `var _ = refuse("path_escape", "m")`, 1},
		{"conversion", `var _ = tools.Code("conflict")`, 1},
		{"assign", `func f() { e.Code = "conflict" }`, 1},
		{"compare", `var _ = env.Error.Code != "draining" && te.Code == "cancelled"`, 2},
		{"switch", `func f() { switch te.Code { case "a", "b": } }`, 2},
		{"constant", `var _ = e.WithCode(tools.CodeConflict)`, 0},
		{"helper constant", `var _ = refuse(tools.CodePathEscape, "path_escape is a message")`, 0},
		{"no code", `var _ = te.Code == ""`, 0},
		{"other fields", `var _ = x{Name: "conflict"}`, 0},
		{"another package's helper of the name", `var _ = fieldError("/prompt", "m")`, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := []srctest.File{parseSrc(t, "p/helper.go", helper), parseSrc(t, "p/x.go", "package p\n"+tt.body+"\n"),
				parseSrc(t, "q/q.go", "package q\nfunc fieldError(code tools.Code, msg string) {}\n")}
			if got := codeLiterals(files[1], codeParams(files)); len(got) != tt.found {
				t.Errorf("found %v, want %d", got, tt.found)
			}
		})
	}
}

func parseSrc(t *testing.T, path, src string) srctest.File {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return srctest.File{Path: path, Fset: fset, AST: f}
}

// codeParams names the functions and methods that take a tools.Code, with
// the positions of those parameters: a function as "dir.name" (how a call
// in its own package reaches it) and, like a method, as ".name" (how a
// selector reaches it). A selector call is matched by name only, which can
// only make the check stricter.
func codeParams(files []srctest.File) map[string][]int {
	out := map[string][]int{}
	for _, f := range files {
		for _, d := range f.AST.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			i := 0
			for _, field := range fd.Type.Params.List {
				n := max(1, len(field.Names))
				if isCodeType(field.Type) {
					for k := range n {
						if fd.Recv == nil {
							key := filepath.Dir(f.Path) + "." + fd.Name.Name
							out[key] = append(out[key], i+k)
						}
						out["."+fd.Name.Name] = append(out["."+fd.Name.Name], i+k)
					}
				}
				i += n
			}
		}
	}
	return out
}

func isCodeType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Code"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Code" && isIdent(e.X, "tools")
	}
	return false
}

// codeLiterals returns where f writes a code as a string literal.
func codeLiterals(f srctest.File, params map[string][]int) []string {
	var found []token.Pos
	flag := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value != `""` && lit.Value != "``" {
			found = append(found, lit.Pos())
		}
	}
	dir := filepath.Dir(f.Path)
	ast.Inspect(f.AST, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if isIdent(n.Key, "Code") {
				flag(n.Value)
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if isCodeSelector(l) && i < len(n.Rhs) {
					flag(n.Rhs[i])
				}
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				if isCodeSelector(n.X) {
					flag(n.Y)
				}
				if isCodeSelector(n.Y) {
					flag(n.X)
				}
			}
		case *ast.SwitchStmt:
			if n.Tag != nil && isCodeSelector(n.Tag) {
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						flag(e)
					}
				}
			}
		case *ast.CallExpr:
			flagCall(n, dir, params, flag)
		}
		return true
	})
	out := make([]string, len(found))
	for i, p := range found {
		out[i] = f.Fset.Position(p).String()
	}
	return out
}

func flagCall(n *ast.CallExpr, dir string, params map[string][]int, flag func(ast.Expr)) {
	if isCodeType(n.Fun) && len(n.Args) == 1 { // tools.Code("...")
		flag(n.Args[0])
		return
	}
	var name string
	switch fn := n.Fun.(type) {
	case *ast.Ident:
		name = dir + "." + fn.Name
	case *ast.SelectorExpr:
		name = "." + fn.Sel.Name
	}
	for _, i := range params[name] {
		if i < len(n.Args) {
			flag(n.Args[i])
		}
	}
}

// isCodeSelector: x.Code, the field every code lives in.
func isCodeSelector(e ast.Expr) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "Code"
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
