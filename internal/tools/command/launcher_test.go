package command

import (
	"errors"
	"testing"
	"time"

	"github.com/toold/toold/internal/tools"
)

// TestLauncherRetiresItsThread: when the launcher's thread cannot return
// to its mount namespace after starting a run, it is retired: that call
// and every later one fail with sandbox_failed, at once, and toold goes
// on (it used to panic, ending the process).
func TestLauncherRetiresItsThread(t *testing.T) {
	s, _ := newSet(t, ModeNamespaces, Config{Tools: []ToolConfig{argvTool("t", "true")}})
	if sb := tool(t, s, "t").(*declared).sb; !sb.minimalRoot() || sb.userns {
		t.Skip("SKIPPED: the minimal root needs toold to be root")
	}
	if _, err := call(t, tool(t, s, "t"), map[string]any{}, 10*time.Second); err != nil {
		t.Fatalf("before: %v", err)
	}
	leaveRun = func(int) error { return errors.New("setns: invalid argument (injected)") }
	t.Cleanup(func() { leaveRun = leaveRunNS })
	for i := range 3 {
		start := time.Now()
		_, err := call(t, tool(t, s, "t"), map[string]any{}, 10*time.Second)
		te, ok := tools.AsError(err)
		if !ok || te.Kind != tools.SystemError || te.Code != "sandbox_failed" {
			t.Fatalf("call %d: %v, want a system error with code sandbox_failed", i, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("call %d took %v", i, d)
		}
	}
}
