//go:build !linux

package launch

import (
	"runtime"
	"strings"
	"testing"
)

// onlyNone checks that auto and Linux's modes refuse here, naming the OS,
// and returns the runner of an explicit none.
func onlyNone(t *testing.T) *Runner {
	t.Helper()
	l, err := New(Config{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, m := range []Mode{ModeAuto, ModeNamespaces, ModeBwrap} {
		if _, err := l.CommandRunner(Sandbox{Containment: string(m)}); err == nil || !strings.Contains(err.Error(), runtime.GOOS) {
			t.Errorf("%s: %v, want a refusal naming %s", m, err, runtime.GOOS)
		}
	}
	r, err := l.CommandRunner(Sandbox{Containment: string(ModeNone)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
