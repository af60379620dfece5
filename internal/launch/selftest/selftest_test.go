package selftest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/launchtest"
)

// TestMain is a probe when the selftest runs this binary as one (as toold
// runs itself: `sandbox probe …`), and the sandbox shim when a mode needs
// it.
func TestMain(m *testing.M) {
	launch.Shim()
	if len(os.Args) > 2 && os.Args[1] == "sandbox" && os.Args[2] == "probe" {
		os.Exit(Probe(os.Args[3:], os.Stdout))
	}
	os.Exit(m.Run())
}

// TestSelftestHere runs every attack in every mode this machine provides,
// with this test binary as the probe: the modes that isolate hold every
// one; none lets through what it cannot stop (it says so), and keeps
// toold's port only where a port guard exists. The table says all of it.
// cmd/toold's TestSandboxSelftest runs the same through the built toold.
func TestSelftestHere(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Options{Exe: exe})
	if err != nil {
		t.Fatal(err)
	}
	table := r.Table()
	t.Log("\n" + table)
	for _, m := range r.Modes {
		if why, down := r.Unavailable[m]; down {
			launchtest.Unavailable(t, "containment %s: %s", m, why)
			continue
		}
		for _, a := range r.Attacks {
			c := r.Cells[a][m]
			switch {
			case c.Verdict == Errored:
				t.Errorf("%s, %s: the probe failed: %s", m, a, c.Detail)
			case KnownGap(m, a) != "" && c.Verdict != NotHeld:
				t.Errorf("%s, %s: %s — a known gap closed: take it out of KnownGap and docs/security.md (%s)", m, a, c.Verdict, c.Detail)
			case KnownGap(m, a) != "":
			case m != launch.ModeNone && c.Verdict != Held:
				t.Errorf("%s, %s: %s: %s", m, a, c.Verdict, c.Detail)
			}
		}
	}
	if slices.Contains(r.Modes, launch.ModeNone) && r.Unavailable[launch.ModeNone] == "" {
		for _, a := range []string{"write outside the workspace", "use the network it was not given"} {
			if c := r.Cells[a][launch.ModeNone]; c.Verdict != NotHeld {
				t.Errorf("none, %s: %s — the attack itself does not work (%s)", a, c.Verdict, c.Detail)
			}
		}
	}
	if !strings.Contains(table, "attack") || strings.Count(table, "\n") < len(r.Attacks) {
		t.Errorf("the table:\n%s", table)
	}
}

// TestProbeRefusesBadArguments: a probe with arguments it does not know
// says so (exit 2), never a verdict.
func TestProbeRefusesBadArguments(t *testing.T) {
	var out strings.Builder
	for _, args := range [][]string{nil, {"write"}, {"read", "a", "b"}, {"dial"}, {"fly"}} {
		if code := Probe(args, &out); code != 2 {
			t.Errorf("Probe(%q) = %d, want 2", args, code)
		}
	}
}
