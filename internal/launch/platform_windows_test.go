package launch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests of Windows's modes. Not run where this was written (no
// Windows machine): compiled by CI's GOOS=windows go vet. They are what a
// Windows machine must pass.

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

// TestJobHolds (Windows): auto is job; a run writes its TEMP but not a
// read-only workspace; its process count is held by the job; a tree that
// outlives the deadline ends with the job; every result says the network
// is not isolated.
func TestJobHolds(t *testing.T) {
	l := osLauncher(t)
	r := runner(t, l, Sandbox{Rlimits: Rlimits{Processes: 3}})
	if !strings.HasPrefix(r.Containment(), "job") {
		t.Fatalf("auto is %q", r.Containment())
	}
	run := func(argv ...string) *Result {
		t.Helper()
		res, err := r.Run(context.Background(), RunSpec{Argv: argv, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("cmd", "/c", "echo x> %TEMP%\\t && type %TEMP%\\t"); !res.OK || res.Containment != jobNoNetwork {
		t.Errorf("TEMP: %+v", res)
	}
	if res := run("cmd", "/c", "echo x> "+filepath.Join(l.Workspace(), "out.txt")); res.OK {
		t.Errorf("a read-only workspace was written: %+v", res)
	}
	start := time.Now()
	res := run("cmd", "/c", "start /b ping -n 60 127.0.0.1 & ping -n 60 127.0.0.1")
	if !res.TimedOut || time.Since(start) > 10*time.Second {
		t.Errorf("the tree outlived its deadline: %+v after %v", res, time.Since(start))
	}
	if !strings.Contains(res.Limits["processes"], "ActiveProcessLimit=3") {
		t.Errorf("limits %v", res.Limits)
	}
}
