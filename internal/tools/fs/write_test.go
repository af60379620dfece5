package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func TestWriteFile(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{"old.txt": "old\n"})
	if err := os.Chmod(filepath.Join(tw.dir, "old.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		want       writeResult
		file       string
		perm       os.FileMode
	}{
		{name: "create", args: `{"path":"new.txt","content":"hello\n"}`,
			want: writeResult{Path: "new.txt", BytesWritten: 6, SHA256: sum("hello\n"), Created: true}, file: "new.txt", perm: 0o644},
		{name: "create with directories", args: `{"path":"a/b/c.txt","content":"c","create_dirs":true}`,
			want: writeResult{Path: "a/b/c.txt", BytesWritten: 1, SHA256: sum("c"), Created: true}, file: "a/b/c.txt", perm: 0o644},
		{name: "create empty", args: `{"path":"empty","content":""}`,
			want: writeResult{Path: "empty", SHA256: sum(""), Created: true}, file: "empty", perm: 0o644},
		{name: "replace with the current hash keeps permissions", args: `{"path":"old.txt","content":"new\n","expected_sha256":"` + strings.ToUpper(sum("old\n")) + `"}`,
			want: writeResult{Path: "old.txt", BytesWritten: 4, SHA256: sum("new\n")}, file: "old.txt", perm: 0o600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tw.exec(t, "write_file", tc.args)
			mustOK(t, err)
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			info, err := os.Stat(filepath.Join(tw.dir, tc.file))
			mustOK(t, err)
			if info.Mode().Perm() != tc.perm {
				t.Errorf("permissions %v, want %v", info.Mode().Perm(), tc.perm)
			}
			if got := sum(tw.read(t, tc.file)); got != tc.want.SHA256 {
				t.Errorf("file content hash %s, want %s", got, tc.want.SHA256)
			}
		})
	}
	checkNoTemp(t, tw.dir)
}

func TestWriteFileErrors(t *testing.T) {
	tests := []struct {
		name, args string
		opts       Options
		kind       tools.Kind
		code       string
	}{
		{name: "existing file without hash", args: `{"path":"old.txt","content":"x"}`, kind: tools.UserError, code: "conflict"},
		{name: "stale hash", args: `{"path":"old.txt","content":"x","expected_sha256":"` + sum("older\n") + `"}`, kind: tools.UserError, code: "conflict"},
		{name: "hash for a missing file", args: `{"path":"gone.txt","content":"x","expected_sha256":"` + sum("x") + `"}`, kind: tools.UserError, code: "conflict"},
		{name: "missing parent", args: `{"path":"no/dir/x.txt","content":"x"}`, kind: tools.UserError, code: "not_found"},
		{name: "parent is a file", args: `{"path":"old.txt/x","content":"x"}`, kind: tools.UserError, code: "not_a_directory"},
		{name: "grandparent is a file", args: `{"path":"old.txt/x/y","content":"x"}`, kind: tools.UserError, code: "not_a_directory"},
		{name: "parent is a file with create_dirs", args: `{"path":"old.txt/x/y","content":"x","create_dirs":true}`, kind: tools.UserError, code: "not_a_directory"},
		{name: "directory", args: `{"path":"dir","content":"x"}`, kind: tools.UserError, code: "is_directory"},
		{name: "workspace root", args: `{"path":".","content":"x"}`, kind: tools.UserError, code: "is_directory"},
		{name: "content too large", args: `{"path":"n.txt","content":"12345"}`, opts: Options{MaxWriteBytes: 4}, kind: tools.UserError, code: "content_too_large"},
		{name: "existing file too large to hash", args: `{"path":"old.txt","content":"x","expected_sha256":"` + sum("old\n") + `"}`, opts: Options{MaxFileBytes: 2}, kind: tools.UserError, code: "file_too_large"},
		{name: "symlink inside the workspace", args: `{"path":"link.txt","content":"x","expected_sha256":"` + sum("old\n") + `"}`, kind: tools.UserError, code: "is_symlink"},
		{name: "malformed hash", args: `{"path":"old.txt","content":"x","expected_sha256":"abc"}`, kind: tools.ValidationError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, tc.opts)
			tw.write(t, map[string]string{"old.txt": "old\n", "dir/x": "x"})
			if err := os.Symlink("old.txt", filepath.Join(tw.dir, "link.txt")); err != nil {
				t.Fatal(err)
			}
			_, err := tw.exec(t, "write_file", tc.args)
			if tc.kind == tools.ValidationError {
				if te, ok := tools.AsError(err); !ok || te.Kind != tc.kind {
					t.Fatalf("want validation error, got %v", err)
				}
			} else {
				wantErr(t, err, tc.kind, tc.code)
			}
			if got := tw.read(t, "old.txt"); got != "old\n" {
				t.Errorf("old.txt changed to %q", got)
			}
			checkNoTemp(t, tw.dir)
		})
	}
}

// TestWriteConcurrent starts writers that all read the same version: the
// per-path lock makes exactly one of them win, the others see a conflict.
func TestWriteConcurrent(t *testing.T) {
	for _, tool := range []string{"write_file", "edit_file"} {
		t.Run(tool, func(t *testing.T) {
			tw := newTestWS(t, Options{})
			tw.write(t, map[string]string{"shared.txt": "v0\n"})
			// A second spelling of the same directory must share the lock.
			if err := os.Symlink(".", filepath.Join(tw.dir, "alias")); err != nil {
				t.Fatal(err)
			}
			const n = 16
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				p := []string{"shared.txt", "alias/shared.txt"}[i%2]
				args := fmt.Sprintf(`{"path":%q,"content":"v%d\n","expected_sha256":"%s"}`, p, i+1, sum("v0\n"))
				if tool == "edit_file" {
					args = fmt.Sprintf(`{"path":%q,"old_string":"v0","new_string":"v%d","expected_sha256":"%s"}`, p, i+1, sum("v0\n"))
				}
				wg.Go(func() { _, errs[i] = tw.exec(t, tool, args) })
			}
			wg.Wait()
			wins := 0
			for _, err := range errs {
				if err == nil {
					wins++
					continue
				}
				if te, ok := tools.AsError(err); !ok || te.Code != "conflict" {
					t.Errorf("want conflict, got %v", err)
				}
			}
			if wins != 1 {
				t.Errorf("%d writers won, want exactly 1", wins)
			}
			if got := tw.read(t, "shared.txt"); got == "v0\n" {
				t.Errorf("no write landed")
			}
			if len(tw.w.locks.m) != 0 {
				t.Errorf("lock map keeps %d entries", len(tw.w.locks.m))
			}
			checkNoTemp(t, tw.dir)
		})
	}
}

// TestReadThenWrite is the intended flow: the sha256 read_file returns is
// what write_file and edit_file accept.
func TestReadThenWrite(t *testing.T) {
	tw := newTestWS(t, Options{MaxReadBytes: 20})
	tw.write(t, map[string]string{"f.txt": strings.Repeat("some text\n", 50)})
	res, err := tw.exec(t, "read_file", `{"paths":["f.txt"],"limit":1}`)
	mustOK(t, err)
	h := res.(readResult).Files[0].SHA256 // of the whole file, though one line was shown
	res, err = tw.exec(t, "edit_file", editArgsJSON("f.txt", "some text\nsome text\n", "x\n", 25, h))
	mustOK(t, err)
	_, err = tw.exec(t, "write_file", `{"path":"f.txt","content":"done\n","expected_sha256":"`+res.(editResult).SHA256+`"}`)
	mustOK(t, err)
	if got := tw.read(t, "f.txt"); got != "done\n" {
		t.Errorf("content %q", got)
	}
}

func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".toold-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}
