package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// modes are the containment modes the tests of every mode run under.
var modes = []Mode{ModeNone, ModeNamespaces, ModeBwrap}

// testLauncher builds a Launcher whose default is mode over a fresh
// workspace the run-as uid can reach.
func testLauncher(t testing.TB, mode Mode, cfg Config) *Launcher {
	t.Helper()
	cfg.Containment = string(mode)
	l, err := New(cfg, launchtest.Workspace(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// sandboxed resolves sb as a command tool's on a new Launcher in mode,
// skipping the test with the reason when this machine cannot provide the
// mode.
func sandboxed(t testing.TB, mode Mode, cfg Config, sb Sandbox) *Runner {
	t.Helper()
	return commandRunner(t, testLauncher(t, mode, cfg), sb)
}

// commandRunner resolves sb as a command tool's on l, skipping the test
// when this machine cannot provide its mode (failing it where a sandbox is
// required: launchtest.Unavailable).
func commandRunner(t testing.TB, l *Launcher, sb Sandbox) *Runner {
	t.Helper()
	r, err := l.CommandRunner(sb)
	if err != nil {
		skipUnavailable(t, err)
		t.Fatal(err)
	}
	return r
}

// skipUnavailable skips t (or fails it, where a sandbox is required) when
// err says this machine lacks a containment mode; other errors return.
func skipUnavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrUnavailable) {
		launchtest.Unavailable(t, "this machine lacks the sandbox: %v", err)
	}
}

// runFor runs argv under a deadline.
func runFor(t testing.TB, r *Runner, timeout time.Duration, argv ...string) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.Run(ctx, RunSpec{Argv: argv})
}

// procsWith lists the pids whose environment or command line holds marker.
func procsWith(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + e.Name() + "/" + f)
			if err == nil && strings.Contains(string(b), marker) {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// procsOfUID lists the processes (zombies included) whose real uid is uid.
func procsOfUID(uid int) []string {
	var pids []string
	want := fmt.Sprintf("Uid:\t%d\t", uid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err == nil && strings.Contains(string(b), want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
