package launch

import (
	"errors"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestLauncherRetiresItsThread: when the launcher's thread cannot return
// to its mount namespace after starting a run, it is retired: that run
// and every later one fail with a Retired error, at once, and toold goes
// on (it used to panic, ending the process). Command tools answer it as
// sandbox_failed (internal/tools/command, TestToolError).
func TestLauncherRetiresItsThread(t *testing.T) {
	r := sandboxed(t, ModeNamespaces, Config{}, Sandbox{})
	if !r.sb.minimalRoot() || r.sb.userns {
		launchtest.NeedsRoot(t, "the minimal root on the launcher thread needs toold to be root")
	}
	if _, err := runFor(t, r, 10*time.Second, "true"); err != nil {
		t.Fatalf("before: %v", err)
	}
	leaveRun = func(int) error { return errors.New("setns: invalid argument (injected)") }
	t.Cleanup(func() { leaveRun = leaveRunNS })
	for i := range 3 {
		start := time.Now()
		_, err := runFor(t, r, 10*time.Second, "true")
		var le *Error
		if !errors.As(err, &le) || le.Kind != Retired {
			t.Fatalf("run %d: %v, want a Retired error", i, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("run %d took %v", i, d)
		}
	}
}
