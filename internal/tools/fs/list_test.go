package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func listTree() map[string]string {
	return map[string]string{
		"a.go": "package a\n", "b.md": "# b\n", ".gitignore": "bin/\n",
		"src/x.go": "package src\n", "src/y.txt": "y\n", "src/sub/z.go": "package sub\n",
		"docs/readme.md": "docs\n", ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n",
	}
}

func TestListFiles(t *testing.T) {
	everything := []string{".gitignore", "a.go", "b.md", "docs", "docs/readme.md", "src", "src/sub", "src/sub/z.go", "src/x.go", "src/y.txt"}
	tests := []struct {
		name      string
		opts      Options
		args      string
		want      []string
		total     int
		truncated bool
	}{
		{name: "default is everything but .git", args: `{}`, want: everything},
		{name: "doublestar", args: `{"patterns":["**"]}`, want: everything},
		{name: "recursive extension", args: `{"patterns":["**/*.go"]}`, want: []string{"a.go", "src/sub/z.go", "src/x.go"}},
		{name: "star stays in one directory", args: `{"patterns":["*.go"]}`, want: []string{"a.go"}},
		{name: "alternatives", args: `{"patterns":["*.{go,md}"]}`, want: []string{"a.go", "b.md"}},
		{name: "base and alternatives", args: `{"patterns":["src/**/*.{go,txt}"]}`, want: []string{"src/sub/z.go", "src/x.go", "src/y.txt"}},
		{name: "overlapping patterns are de-duplicated", args: `{"patterns":["src/**/*.go","**/*.go","src/*"]}`,
			want: []string{"a.go", "src/sub", "src/sub/z.go", "src/x.go", "src/y.txt"}},
		{name: "unclean pattern", args: `{"patterns":["./src/../src/*.go"]}`, want: []string{"src/x.go"}},
		{name: ".git when named", args: `{"patterns":[".git/*"]}`, want: []string{".git/HEAD", ".git/config"}},
		{name: ".gitignore does not name .git", args: `{"patterns":["**/.git*"]}`, want: []string{".gitignore"}},
		{name: "missing base matches nothing", args: `{"patterns":["nope/**"]}`, want: []string{}},
		{name: "cap", args: `{"max_entries":3}`, want: everything[:3], total: len(everything), truncated: true},
		{name: "server cap wins", opts: Options{MaxEntries: 2}, args: `{"max_entries":5}`, want: everything[:2], total: len(everything), truncated: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, tc.opts)
			tw.write(t, listTree())
			res, err := tw.exec(t, "list_files", tc.args)
			mustOK(t, err)
			got := res.(listResult)
			paths := []string{}
			for _, e := range got.Entries {
				paths = append(paths, e.Path)
			}
			if diff := cmp.Diff(tc.want, paths); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			if tc.total == 0 {
				tc.total = len(tc.want)
			}
			if got.TotalMatched != tc.total || got.Truncated != tc.truncated {
				t.Errorf("total %d truncated %v, want %d %v", got.TotalMatched, got.Truncated, tc.total, tc.truncated)
			}
		})
	}
}

func TestListFilesKinds(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{"dir/f.txt": "12345"})
	if err := os.Symlink("dir", filepath.Join(tw.dir, "link")); err != nil {
		t.Skip("symlinks unavailable:", err)
	}
	res, err := tw.exec(t, "list_files", `{}`)
	mustOK(t, err)
	want := []listEntry{{"dir", "dir", 0}, {"dir/f.txt", "file", 5}, {"link", "symlink", 0}}
	if diff := cmp.Diff(want, res.(listResult).Entries); diff != "" {
		t.Errorf("symlinks are listed, not followed (-want +got):\n%s", diff)
	}
	// A symlinked directory inside the workspace may be a pattern's base.
	res, err = tw.exec(t, "list_files", `{"patterns":["link/*"]}`)
	mustOK(t, err)
	if diff := cmp.Diff([]listEntry{{"link/f.txt", "file", 5}}, res.(listResult).Entries); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestListFilesErrors(t *testing.T) {
	tests := []struct {
		args string
		kind tools.Kind
		code string
	}{
		{`{"patterns":["src/["]}`, tools.UserError, "invalid_glob"},
		{`{"patterns":["**","{a,b"]}`, tools.UserError, "invalid_glob"},
		{`{"patterns":["../**"]}`, tools.SecurityError, "path_escape"},
		{`{"patterns":["/etc/*"]}`, tools.SecurityError, "absolute_path"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			tw := newTestWS(t, Options{})
			_, err := tw.exec(t, "list_files", tc.args)
			te := wantErr(t, err, tc.kind, tc.code)
			if tc.code == "invalid_glob" && len(te.Fields) != 1 {
				t.Errorf("fields: %+v", te.Fields)
			}
		})
	}
}

func TestComparePaths(t *testing.T) {
	got := []string{"a.txt", "a/b", "a", "a/b/c", "ab", "a-b"}
	want := []string{"a", "a/b", "a/b/c", "a-b", "a.txt", "ab"}
	disjoint := disjointBases(got) // sorts in place, then drops nested bases
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "a-b", "a.txt", "ab"}, disjoint); diff != "" {
		t.Errorf("disjoint (-want +got):\n%s", diff)
	}
}
