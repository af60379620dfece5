package launch

import (
	"errors"
	"slices"
	"testing"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestExposedUntilThePortsAreGuarded: Launcher.Exposed (what cmd/toold
// withholds the anonymous caller for) lists the kinds of sandbox whose
// programs can reach toold's listeners: before ProtectPorts, every
// networked one and none; after it, on a kernel with Landlock's network
// rules, none of them; a sandbox without the network in a mode with a
// network namespace never.
func TestExposedUntilThePortsAreGuarded(t *testing.T) {
	l, err := New(Config{}, launchtest.Workspace(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, sb := range []Sandbox{{Containment: "none"}, {Containment: "bwrap", Network: NetworkOn()}, {Containment: "bwrap"}} {
		if _, err := l.CommandRunner(sb); err != nil {
			if errors.Is(err, ErrUnavailable) {
				launchtest.Unavailable(t, "%s: %v", sb.Containment, err)
			}
			t.Fatal(err)
		}
	}
	want := []string{"containment bwrap with network true", "containment none with network false"}
	if got := l.Exposed(); !slices.Equal(got, want) {
		t.Errorf("before ProtectPorts: %q, want %q", got, want)
	}
	if err := l.ProtectPorts(1); errors.Is(err, ErrNoPortGuard) {
		launchtest.Unavailable(t, "no port guard on this kernel: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if got := l.Exposed(); len(got) != 0 {
		t.Errorf("after ProtectPorts: %q, want nothing", got)
	}
}
