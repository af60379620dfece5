package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests of macOS's modes. Not run where this was written (no Mac):
// compiled by CI's GOOS=darwin go vet. They are what a Mac must pass.

// TestNoneRunsHere (macOS): an explicit none runs the program in its own
// process group under its rlimits (the shim), and a run past its timeout
// is stopped, its group with it.
func TestNoneRunsHere(t *testing.T) {
	r := runner(t, osLauncher(t), Sandbox{Containment: string(ModeNone), Rlimits: Rlimits{OpenFiles: 77}})
	res, err := r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", `echo "ok $TMPDIR $(ulimit -n)"`}})
	if err != nil || !res.OK || !strings.HasPrefix(res.Stdout, "ok /") || !strings.HasSuffix(res.Stdout, " 77\n") || res.Containment != notIsolated {
		t.Fatalf("%+v, %v", res, err)
	}
	start := time.Now()
	res, err = r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", "sleep 30 & sleep 30"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v, %v after %v", res, err, time.Since(start))
	}
	if res.Limits["descendants"] != groupOnly || !strings.Contains(res.Limits["open_files"], "RLIMIT_NOFILE 77") {
		t.Errorf("limits %v", res.Limits)
	}
}

// TestSeatbeltHolds (macOS): auto is seatbelt; a run reads the workspace
// and writes its TMPDIR, but not a read-only workspace, not .git of a
// writable one, not toold's own files, not the user's home, and not the
// network unless allowed.
func TestSeatbeltHolds(t *testing.T) {
	home, _ := os.UserHomeDir()
	private := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "key"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Private: []string{private}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ws := l.Workspace()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := func(r *Runner, script string) *Result {
		t.Helper()
		res, err := r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", script}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ro := runner(t, l, Sandbox{})
	if !strings.HasPrefix(ro.Containment(), "seatbelt") {
		t.Fatalf("auto is %q", ro.Containment())
	}
	for script, ok := range map[string]bool{
		"cat in.txt": true,
		`echo x > "$TMPDIR/t" && cat "$TMPDIR/t"`: true,
		"echo x > out.txt":                        false,
		"cat " + filepath.Join(private, "key"):    false,
		"ls " + home:                              false,
		"curl -sS -m 5 http://127.0.0.1:9":        false,
	} {
		if res := sh(ro, script); res.OK != ok {
			t.Errorf("%s: ok %v, want %v (%s)", script, res.OK, ok, res.Stderr)
		}
	}
	rw := runner(t, l, Sandbox{WorkspaceWritable: true})
	for script, ok := range map[string]bool{"echo x > out.txt": true, "echo x > .git/config": false, "echo x > .GIT/hooks": false} {
		if res := sh(rw, script); res.OK != ok {
			t.Errorf("writable: %s: ok %v, want %v (%s)", script, res.OK, ok, res.Stderr)
		}
	}
}
