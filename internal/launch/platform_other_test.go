//go:build !linux

package launch

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

// osLauncher checks that the modes of other OSes refuse here, naming this
// one, and returns a Launcher over a fresh workspace.
func osLauncher(t *testing.T) *Launcher {
	t.Helper()
	l, err := New(Config{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, m := range []Mode{ModeNamespaces, ModeBwrap, ModeSeatbelt, ModeJob} {
		if slices.Contains(osModes, m) {
			continue
		}
		if _, err := l.CommandRunner(Sandbox{Containment: string(m)}); err == nil || !strings.Contains(err.Error(), runtime.GOOS) {
			t.Errorf("%s: %v, want a refusal naming %s", m, err, runtime.GOOS)
		}
	}
	return l
}

// runner resolves sb on l, failing the test when it cannot.
func runner(t *testing.T, l *Launcher, sb Sandbox) *Runner {
	t.Helper()
	r, err := l.CommandRunner(sb)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
