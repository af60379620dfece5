//go:build unix

package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toold/toold/internal/tools"
)

// hostileWS adds the traps: symlinks leading out of the workspace (relative
// and absolute, to the canary file and to its directory) and a FIFO.
func hostileWS(t *testing.T) *testWS {
	t.Helper()
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{"ok.txt": "ok\n", "dir/x.txt": "x\n"})
	links := map[string]string{
		"out_file":     "../outside/canary.txt",
		"out_file_abs": filepath.Join(tw.outside, "canary.txt"),
		"out_dir":      "../outside",
		"out_dir_abs":  tw.outside,
		"dir/up_out":   "../../outside",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(tw.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(tw.dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tw
}

func TestHostilePaths(t *testing.T) {
	long := strings.Repeat("a/", 2500)      // 5000 bytes
	comp := "d/" + strings.Repeat("b", 300) // one 300-byte component
	canarySum := sum("CANARY-" + strings.Repeat("s3cr3t", 4) + "\n")
	type tc struct {
		tool, args string
		kind       tools.Kind
		code       string
	}
	var cases []tc
	// Every path-taking tool gets every hostile path.
	paths := []struct{ path, code string }{
		{"../x", "path_escape"},
		{"../outside/canary.txt", "path_escape"},
		{"/etc/passwd", "absolute_path"},
		{"a/../../x", "path_escape"},
		{"./../x", "path_escape"},
		{"ok.txt\x00../../etc/passwd", "nul_byte"},
		{long, "path_too_long"},
		{comp, "path_too_long"},
		{"out_file", "symlink_escape"},
		{"out_file_abs", "symlink_escape"},
		{"out_dir/canary.txt", "symlink_escape"},
		{"out_dir_abs/canary.txt", "symlink_escape"},
		{"dir/up_out/canary.txt", "symlink_escape"},
		{"fifo", "not_regular_file"},
	}
	for _, p := range paths {
		jp := jsonString(p.path)
		cases = append(cases,
			tc{"read_file", `{"paths":[` + jp + `]}`, tools.SecurityError, p.code},
			tc{"read_file", `{"paths":["ok.txt",` + jp + `]}`, tools.SecurityError, p.code},
			tc{"write_file", `{"path":` + jp + `,"content":"pwned"}`, tools.SecurityError, p.code},
			tc{"write_file", `{"path":` + jp + `,"content":"pwned","create_dirs":true,"expected_sha256":"` + canarySum + `"}`, tools.SecurityError, p.code},
			tc{"edit_file", editArgsJSON(p.path, "CANARY", "pwned", 0, canarySum), tools.SecurityError, p.code},
		)
	}
	cases = append(cases,
		// Writing below a symlinked directory, with or without create_dirs.
		tc{"write_file", `{"path":"out_dir/new.txt","content":"pwned"}`, tools.SecurityError, "symlink_escape"},
		tc{"write_file", `{"path":"out_dir/sub/new.txt","content":"pwned","create_dirs":true}`, tools.SecurityError, "symlink_escape"},
		tc{"write_file", `{"path":"out_dir_abs/sub/new.txt","content":"pwned","create_dirs":true}`, tools.SecurityError, "symlink_escape"},
		tc{"write_file", `{"path":"dir/up_out/new.txt","content":"pwned"}`, tools.SecurityError, "symlink_escape"},
		tc{"read_file", `{"paths":["out_dir"]}`, tools.SecurityError, "symlink_escape"},
		// Globs are paths too.
		tc{"list_files", `{"patterns":["../outside/*"]}`, tools.SecurityError, "path_escape"},
		tc{"list_files", `{"patterns":["/etc/*"]}`, tools.SecurityError, "absolute_path"},
		tc{"list_files", `{"patterns":["**","x\u0000"]}`, tools.SecurityError, "nul_byte"},
		tc{"list_files", `{"patterns":[` + jsonString(long+"*") + `]}`, tools.SecurityError, "path_too_long"},
		tc{"list_files", `{"patterns":["out_dir/*"]}`, tools.SecurityError, "symlink_escape"},
		tc{"list_files", `{"patterns":["out_dir_abs/**"]}`, tools.SecurityError, "symlink_escape"},
		tc{"grep", `{"pattern":"s3cr3t","path_glob":"../outside/*"}`, tools.SecurityError, "path_escape"},
		tc{"grep", `{"pattern":"s3cr3t","path_glob":"out_dir/*"}`, tools.SecurityError, "symlink_escape"},
		tc{"grep", `{"pattern":"s3cr3t","path_glob":"dir/up_out/**"}`, tools.SecurityError, "symlink_escape"},
		// Walking everything lists the links but never follows them.
		tc{"list_files", `{}`, "", ""},
		tc{"grep", `{"pattern":"CANARY|s3cr3t","case_insensitive":true}`, "", ""},
	)
	for _, c := range cases {
		name := c.tool + " " + c.args
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			tw := hostileWS(t)
			res, err := execWithin(t, tw, c.tool, c.args, 10*time.Second)
			if c.kind == "" {
				mustOK(t, err)
			} else {
				wantErr(t, err, c.kind, c.code)
			}
			tw.checkOutside(t, res, err)
			checkNoTemp(t, tw.dir)
			if got := tw.read(t, "ok.txt"); got != "ok\n" {
				t.Errorf("ok.txt changed: %q", got)
			}
		})
	}
}

// execWithin fails the test instead of hanging when a call blocks (a FIFO
// opened without O_NONBLOCK would wait for a writer forever).
func execWithin(t *testing.T, tw *testWS, tool, args string, d time.Duration) (any, error) {
	t.Helper()
	type out struct {
		res any
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := tw.exec(t, tool, args)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(d):
		t.Fatalf("%s %s did not return within %v", tool, args, d)
		return nil, nil
	}
}

func TestHostileListing(t *testing.T) {
	tw := hostileWS(t)
	res, err := tw.exec(t, "list_files", `{}`)
	mustOK(t, err)
	got := map[string]string{}
	for _, e := range res.(listResult).Entries {
		got[e.Path] = e.Kind
	}
	want := map[string]string{"ok.txt": "file", "dir": "dir", "dir/x.txt": "file", "dir/up_out": "symlink",
		"out_file": "symlink", "out_file_abs": "symlink", "out_dir": "symlink", "out_dir_abs": "symlink", "fifo": "other"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries %v, want %v", got, want)
	}
}
