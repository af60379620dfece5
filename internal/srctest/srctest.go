// Package srctest reads the module's production Go files for tests that
// hold a rule over the whole tree (one way to build a call, error codes as
// constants): each walks the same files, parsed the same way.
package srctest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// File is one parsed production file; Path is as the walk found it
// (relative to the working directory, through root).
type File struct {
	Path string
	Fset *token.FileSet
	AST  *ast.File
}

// ProductionFiles parses every Go file under root that is not a test,
// leaving out .git, node_modules, testdata and vendor. It fails the test
// when the walk finds fewer than 100 files: root is then not the module's,
// and a rule held over nothing would pass.
func ProductionFiles(t testing.TB, root string) []File {
	t.Helper()
	var out []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, File{Path: filepath.Clean(p), Fset: fset, AST: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d Go files under %s: the walk did not start at the module root", len(out), root)
	}
	return out
}
