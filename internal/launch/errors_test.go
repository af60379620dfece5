package launch

import (
	"os"
	"path/filepath"
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

// TestPrivateOutOfReach: a sandbox whose read_only_paths would bind one
// of toold's own files into a run (its state directory, under a home
// directory given whole) is refused, naming both; a path beside them, or
// inside the workspace's parent but not holding them, is not. The check
// comes before any mode is resolved, so it holds on every OS.
func TestPrivateOutOfReach(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, ".local", "state", "toold")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "go"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Containment: "none", Private: []string{state}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		ro      string
		refused bool
	}{
		{home, true},
		{filepath.Join(home, ".local"), true},
		{state, true},
		{link, true}, // through a symlink
		{filepath.Join(home, "go"), false},
		{filepath.Join(state + "-other"), false},
	} {
		_, err := l.sandbox(Sandbox{ReadOnlyPaths: []string{c.ro}})
		if refused := err != nil && strings.Contains(err.Error(), "toold's own "+state); refused != c.refused {
			t.Errorf("read_only_paths %s: %v, want refused %v", c.ro, err, c.refused)
		}
	}
}
