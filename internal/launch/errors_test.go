package launch

import (
	"strings"
	"testing"
)

// TestUnsupportedNamesTheWayOut: on an OS without a sandbox of toold's
// yet, auto and Linux's modes are refused (never a silent none), naming
// the OS and the explicit setting that runs programs unisolated. The text
// is built here; macOS's and Windows's resolve return it.
func TestUnsupportedNamesTheWayOut(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		for _, m := range []Mode{ModeAuto, ModeNamespaces, ModeBwrap} {
			msg := unsupported(goos, m).Error()
			for _, want := range []string{goos, "`containment: none`", "none (not isolated)", "Linux"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s, %s: %q does not say %q", goos, m, msg, want)
				}
			}
			if m != ModeAuto && !strings.Contains(msg, "containment "+string(m)) {
				t.Errorf("%s, %s: %q does not name the mode", goos, m, msg)
			}
		}
	}
}
