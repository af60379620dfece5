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
		"[user]\n\tpath = not-an-include\n" +
		"[diff]\n\texternal = x\n[diff \"evil\"]\n\ttextconv = x\n" +
		"[submodule \"Sub One\"]\n\tupdate = \"!sh -c x\"\n[submodule \"two\"]\n\tupdate = checkout\n" +
		"[extensions]\n\tobjectFormat = sha256\n[core]\n\tworktree = ../wt\n"
	got := parseGitConfig([]byte(cfg))
	want := []gitDriver{{"filter", "lfs"}, {"filter", "Mixed Case"}, {"filter", "q\"uote"}, {"filter", "oldstyle"}, {"merge", "ours"},
		{"diff", "evil"}, {"submodule", "Sub One"}, {"submodule", "two"}}
	if !slices.Equal(got.drivers, want) {
		t.Errorf("drivers %q, want %q", got.drivers, want)
	}
	if !slices.Equal(got.includes, []string{"a b.cfg", "c.cfg"}) {
		t.Errorf("includes %q", got.includes)
	}
	if !slices.Equal(got.commands, []string{"Sub One"}) || got.objectFormat != "sha256" || got.workTree != "../wt" {
		t.Errorf("update commands %q, object format %q, work tree %q", got.commands, got.objectFormat, got.workTree)
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
		got := parseGitConfig([]byte(cfg + "\n[filter \"" + name + "\"]\n"))
		if !slices.Contains(got.drivers, gitDriver{"filter", name}) {
			t.Errorf("filter %q not found in %q: %q", name, cfg, got.drivers)
		}
	})
}
