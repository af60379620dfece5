package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests of Windows's modes. Not run where this was written (no
// Windows machine): compiled by CI's GOOS=windows go vet, and run by the
// Windows job of .github/workflows/desktop.yml. They are what a Windows
// machine must pass; `toold sandbox selftest` tries the same attacks
// through the built binary.

// TestNoneRunsHere (Windows): an explicit none finds a program by PATHEXT
// and runs it, and a run past its timeout is stopped.
func TestNoneRunsHere(t *testing.T) {
	r := runner(t, osLauncher(t), Sandbox{Containment: string(ModeNone)})
	res, err := r.Run(context.Background(), RunSpec{Argv: []string{"cmd", "/c", "echo ok %TEMP%"}})
	if err != nil || !res.OK || !strings.HasPrefix(res.Stdout, "ok ") || res.Containment != notIsolated {
		t.Fatalf("%+v, %v", res, err)
	}
	start := time.Now()
	res, err = r.Run(context.Background(), RunSpec{Argv: []string{"ping", "-n", "30", "127.0.0.1"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v, %v after %v", res, err, time.Since(start))
	}
}

// TestJobHolds (Windows): auto is job (an AppContainer); a run writes its
// TEMP but not a read-only workspace, nor another run's TEMP, nor a file
// outside what is granted; a writable run writes the workspace but not
// .git, nor renames it away; the process count is held by the job; a tree
// that outlives the deadline ends with the job; the grants go at Close.
func TestJobHolds(t *testing.T) {
	l := osLauncher(t)
	ws := l.Workspace()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runner(t, l, Sandbox{Rlimits: Rlimits{Processes: 3}})
	if !strings.HasPrefix(r.Containment(), "job") {
		t.Fatalf("auto is %q", r.Containment())
	}
	run := func(r *Runner, argv ...string) *Result {
		t.Helper()
		res, err := r.Run(context.Background(), RunSpec{Argv: argv, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(r, "cmd", "/c", "echo x> %TEMP%\\t && type %TEMP%\\t"); !res.OK || res.Containment != "job (AppContainer)" {
		t.Errorf("TEMP: %+v", res)
	}
	for _, argv := range [][]string{
		{"cmd", "/c", "echo x> " + filepath.Join(ws, "out.txt")},
		{"cmd", "/c", "type " + outside},
		{"cmd", "/c", "echo x> " + filepath.Join(filepath.Dir(outside), "new.txt")},
	} {
		if res := run(r, argv...); res.OK {
			t.Errorf("%v held nothing: %+v", argv, res)
		}
	}
	rw := runner(t, l, Sandbox{WorkspaceWritable: true})
	if res := run(rw, "cmd", "/c", "echo x> "+filepath.Join(ws, "out.txt")); !res.OK {
		t.Errorf("a writable workspace was not written: %+v", res)
	}
	for _, script := range []string{"echo x> .git\\config", "move .git gone", "rmdir /s /q .git"} {
		if res := run(rw, "cmd", "/c", "cd /d "+ws+" && "+script); res.OK {
			t.Errorf("%s: .git was not protected: %+v", script, res)
		}
	}
	start := time.Now()
	res := run(r, "cmd", "/c", "start /b ping -n 60 127.0.0.1 & ping -n 60 127.0.0.1")
	if !res.TimedOut || time.Since(start) > 15*time.Second {
		t.Errorf("the tree outlived its deadline: %+v after %v", res, time.Since(start))
	}
	if !strings.Contains(res.Limits["processes"], "ActiveProcessLimit=3") || !strings.Contains(res.Limits["network"], "none") {
		t.Errorf("limits %v", res.Limits)
	}
}
