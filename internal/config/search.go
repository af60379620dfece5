package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/toold/toold/internal/registry"
)

// Toolset is a named subset of the catalog.
type Toolset struct {
	// Tools are patterns (path.Match, as keys' tools) of the canonical or
	// function names of the toolset's tools.
	Tools []string `yaml:"tools"`
	// Description says what the toolset is for (shown to MCP clients).
	Description string `yaml:"description"`
	// Pinned are patterns of the toolset's tools that a deferred listing
	// of the toolset (?toolset=<name>) lists in full, besides
	// search.pinned.
	Pinned []string `yaml:"pinned" validate:"dive,required"`
}

// SearchConfig configures tool search (GET /tools/search, the
// search_tools tool) and deferred loading.
type SearchConfig struct {
	// Pinned are patterns (path.Match, as keys' tools) of the tools a
	// deferred listing (?format=anthropic&defer_loading=true) still lists
	// in full, besides search_tools: the few a model needs on every turn,
	// which it should never have to search for.
	Pinned []string `yaml:"pinned" validate:"dive,required"`
	// AlwaysLoaded is the older name of Pinned; both are honoured.
	AlwaysLoaded []string `yaml:"always_loaded" validate:"dive,required"`
}

// PinnedPatterns are the patterns of search.pinned and its older name,
// search.always_loaded.
func (s SearchConfig) PinnedPatterns() []string {
	return append(slices.Clone(s.Pinned), s.AlwaysLoaded...)
}

// ToolsetList returns the toolsets, sorted by name, as the registry takes
// them.
func (c *Config) ToolsetList() []registry.Toolset {
	var out []registry.Toolset
	for _, name := range slices.Sorted(maps.Keys(c.Toolsets)) {
		t := c.Toolsets[name]
		out = append(out, registry.Toolset{Name: name, Description: t.Description, Tools: t.Tools, Pinned: t.Pinned})
	}
	return out
}

// checkToolsets reports malformed toolsets and keys bound to toolsets that
// do not exist.
func (c *Config) checkToolsets(probs *Error) {
	sets, err := registry.NewToolsets(c.ToolsetList())
	if err != nil {
		probs.add("toolsets", "%v", err)
		return
	}
	for i, k := range c.Auth.Keys {
		if _, err := sets.Patterns(k.Toolsets); err != nil {
			probs.add(fmt.Sprintf("auth.keys[%d].toolsets", i), "%v", err)
		}
	}
}
