package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSearchPinned: search.pinned and its older name always_loaded both
// pin; a toolset's pinned patterns reach the registry's toolset, and a
// malformed one is refused with its toolset named.
func TestSearchPinned(t *testing.T) {
	c, err := Load(write(t, `
search:
  pinned: [read_file, "github.get_*"]
  always_loaded: [grep]
toolsets:
  code:
    tools: ["github.*", run_tests]
    pinned: [run_tests]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"read_file", "github.get_*", "grep"}, c.Search.PinnedPatterns()); diff != "" {
		t.Errorf("pinned (-want +got):\n%s", diff)
	}
	if sets := c.ToolsetList(); len(sets) != 1 || !cmp.Equal(sets[0].Pinned, []string{"run_tests"}) {
		t.Errorf("toolsets: %+v", sets)
	}
	_, err = Load(write(t, `
toolsets:
  code:
    tools: ["github.*"]
    pinned: ["[x"]
`), env(nil))
	if err == nil || !strings.Contains(err.Error(), `toolset "code": the pattern "[x" is malformed`) {
		t.Errorf("a malformed pinned pattern: %v", err)
	}
}
