package command

import (
	"slices"
	"strings"
	"testing"
)

// TestParseGitConfig: the drivers and includes a config file names, in
// the spellings git accepts.
func TestParseGitConfig(t *testing.T) {
	cfg := "[core]\n\tbare = false\n" +
		"[filter \"lfs\"]\n\tclean = x\n" +
		"[Filter \"Mixed Case\"]\n" +
		"[filter \"q\\\"uote\"] clean = x\n" +
		"[filter.OldStyle]\n" +
		"[merge \"ours\"]\n\tdriver = y\n" +
		"[include]\n\tpath = \"a b.cfg\" ; comment\n" +
		"[includeIf \"gitdir:/x/\"]\n\tpath = c.cfg\n" +
		"[user]\n\tpath = not-an-include\n"
	drivers, includes := parseGitConfig([]byte(cfg))
	want := []gitDriver{{"filter", "lfs"}, {"filter", "Mixed Case"}, {"filter", "q\"uote"}, {"filter", "oldstyle"}, {"merge", "ours"}}
	if !slices.Equal(drivers, want) {
		t.Errorf("drivers %q, want %q", drivers, want)
	}
	if !slices.Equal(includes, []string{"a b.cfg", "c.cfg"}) {
		t.Errorf("includes %q", includes)
	}
}

// FuzzParseGitConfig: a repository's config is untrusted input; the scan
// never panics, and a filter header it is given is always found.
func FuzzParseGitConfig(f *testing.F) {
	f.Add("[filter \"a\"]\n\tclean = x\n", "b")
	f.Add("[include]\npath = x\n[filter.y]", "z z")
	f.Add("[\"\\", "")
	f.Fuzz(func(t *testing.T, cfg, name string) {
		if strings.ContainsAny(name, "\"\\\n\r") {
			return
		}
		drivers, _ := parseGitConfig([]byte(cfg + "\n[filter \"" + name + "\"]\n"))
		if !slices.Contains(drivers, gitDriver{"filter", name}) {
			t.Errorf("filter %q not found in %q: %q", name, cfg, drivers)
		}
	})
}
