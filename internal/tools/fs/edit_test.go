package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

const editSrc = "package main\n\nfunc main() {\n\tlog.Print(1)\n\tlog.Print(2)\n}\n"

func editArgsJSON(path, old, new string, occ int, hash string) string {
	s := fmt.Sprintf(`{"path":%s,"old_string":%s,"new_string":%s,"expected_sha256":%q`, jsonString(path), jsonString(old), jsonString(new), hash)
	if occ > 0 {
		s += fmt.Sprintf(`,"expected_occurrences":%d`, occ)
	}
	return s + "}"
}

func TestEditFile(t *testing.T) {
	tests := []struct {
		name, old, new string
		occ            int
		want           string
	}{
		{name: "one occurrence", old: "log.Print(1)", new: "slog.Info(\"one\")",
			want: "package main\n\nfunc main() {\n\tslog.Info(\"one\")\n\tlog.Print(2)\n}\n"},
		{name: "all occurrences", old: "log.Print", new: "fmt.Println", occ: 2,
			want: "package main\n\nfunc main() {\n\tfmt.Println(1)\n\tfmt.Println(2)\n}\n"},
		{name: "multi-line, delete", old: "\tlog.Print(1)\n\tlog.Print(2)\n", new: "",
			want: "package main\n\nfunc main() {\n}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, Options{})
			tw.write(t, map[string]string{"main.go": editSrc})
			if err := os.Chmod(filepath.Join(tw.dir, "main.go"), 0o640); err != nil {
				t.Fatal(err)
			}
			res, err := tw.exec(t, "edit_file", editArgsJSON("main.go", tc.old, tc.new, tc.occ, sum(editSrc)))
			mustOK(t, err)
			want := editResult{Path: "main.go", Replacements: max(tc.occ, 1), SHA256: sum(tc.want)}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, tw.read(t, "main.go")); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			if info, _ := os.Stat(filepath.Join(tw.dir, "main.go")); info.Mode().Perm() != 0o640 {
				t.Errorf("permissions %v, want 0640", info.Mode().Perm())
			}
			checkNoTemp(t, tw.dir)
		})
	}
}

func TestEditFileChained(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{"main.go": editSrc})
	res, err := tw.exec(t, "edit_file", editArgsJSON("main.go", "(1)", "(10)", 0, sum(editSrc)))
	mustOK(t, err)
	_, err = tw.exec(t, "edit_file", editArgsJSON("main.go", "(2)", "(20)", 0, res.(editResult).SHA256))
	mustOK(t, err)
	if got := tw.read(t, "main.go"); !strings.Contains(got, "(10)") || !strings.Contains(got, "(20)") {
		t.Errorf("content %q", got)
	}
}

func TestEditFileErrors(t *testing.T) {
	h := sum(editSrc)
	tests := []struct {
		name, args string
		opts       Options
		kind       tools.Kind
		code       string
		inMessage  string
	}{
		{name: "too many occurrences", args: editArgsJSON("main.go", "log.Print", "x", 0, h), kind: tools.UserError, code: "occurrence_mismatch", inMessage: "occurs 2 time(s)"},
		{name: "too few occurrences", args: editArgsJSON("main.go", "log.Print(1)", "x", 3, h), kind: tools.UserError, code: "occurrence_mismatch", inMessage: "occurs 1 time(s)"},
		{name: "not found", args: editArgsJSON("main.go", "     4\tlog.Print(1)", "x", 0, h), kind: tools.UserError, code: "occurrence_mismatch", inMessage: "occurs 0 time(s)"},
		{name: "same text", args: editArgsJSON("main.go", "main", "main", 0, h), kind: tools.UserError, code: "no_change"},
		{name: "stale hash", args: editArgsJSON("main.go", "main", "x", 0, sum("other")), kind: tools.UserError, code: "conflict"},
		{name: "missing file", args: editArgsJSON("mian.go", "main", "x", 0, h), kind: tools.UserError, code: "not_found", inMessage: "mian.go"},
		{name: "binary file", args: editArgsJSON("bin.dat", "a", "b", 0, sum("a\x00b")), kind: tools.UserError, code: "binary_file"},
		{name: "directory", args: editArgsJSON("dir", "a", "b", 0, h), kind: tools.UserError, code: "is_directory"},
		{name: "result too large", args: editArgsJSON("main.go", "main()", strings.Repeat("x", 100), 0, h), opts: Options{MaxWriteBytes: 80}, kind: tools.UserError, code: "content_too_large"},
		{name: "file too large", args: editArgsJSON("main.go", "main()", "x", 0, h), opts: Options{MaxFileBytes: 10}, kind: tools.UserError, code: "file_too_large"},
		{name: "missing hash", args: `{"path":"main.go","old_string":"a","new_string":"b"}`, kind: tools.ValidationError},
		{name: "empty old_string", args: editArgsJSON("main.go", "", "x", 0, h), kind: tools.ValidationError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, tc.opts)
			tw.write(t, map[string]string{"main.go": editSrc, "bin.dat": "a\x00b", "dir/x": ""})
			_, err := tw.exec(t, "edit_file", tc.args)
			if tc.kind == tools.ValidationError {
				if te, ok := tools.AsError(err); !ok || te.Kind != tc.kind {
					t.Fatalf("want validation error, got %v", err)
				}
			} else if te := wantErr(t, err, tc.kind, tc.code); !strings.Contains(te.Message, tc.inMessage) {
				t.Errorf("message %q lacks %q", te.Message, tc.inMessage)
			}
			if got := tw.read(t, "main.go"); got != editSrc {
				t.Errorf("main.go changed to %q", got)
			}
			checkNoTemp(t, tw.dir)
		})
	}
}
