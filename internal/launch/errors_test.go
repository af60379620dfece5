package launch

import (
	"strings"
	"testing"
)

// TestUnsupportedNamesTheWayOut: a mode another OS provides is refused
// (never a silent none), naming the OS, the modes it has and the explicit
// setting that runs programs unisolated. The text is built here; the mode
// check of Launcher.sandbox returns it on every OS.
func TestUnsupportedNamesTheWayOut(t *testing.T) {
	for _, c := range []struct {
		goos string
		have []Mode
		not  []Mode
	}{
		{"linux", []Mode{ModeAuto, ModeNone, ModeNamespaces, ModeBwrap}, []Mode{ModeSeatbelt, ModeJob}},
		{"darwin", []Mode{ModeAuto, ModeNone, ModeSeatbelt}, []Mode{ModeNamespaces, ModeBwrap, ModeJob}},
		{"windows", []Mode{ModeAuto, ModeNone, ModeJob}, []Mode{ModeNamespaces, ModeBwrap, ModeSeatbelt}},
	} {
		for _, m := range c.not {
			msg := unsupported(c.goos, m, c.have).Error()
			for _, want := range []string{c.goos, "containment " + string(m), "`containment: none`", "none (not isolated)",
				string(c.have[len(c.have)-1])} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s, %s: %q does not say %q", c.goos, m, msg, want)
				}
			}
		}
	}
}
