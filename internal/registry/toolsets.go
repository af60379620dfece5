package registry

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// ToolsetNamePattern is the rule for toolset names: they are a path
// segment of /mcp/<toolset> and a query parameter.
var ToolsetNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Toolset is a named subset of the catalog (toolsets.<name> in the
// configuration): the tools whose canonical or function name matches one
// of its patterns.
type Toolset struct {
	Name        string
	Description string
	Tools       []string
	// Pinned are patterns of the tools a deferred listing of the toolset
	// lists in full (toolsets.<name>.pinned).
	Pinned []string
}

// Contains reports whether the tool belongs to the toolset.
func (t *Toolset) Contains(e *Entry) bool { return e.Matches(t.Tools) }

// Toolsets are the configured toolsets, by name.
type Toolsets map[string]*Toolset

// NewToolsets checks the toolsets: valid names, at least one well-formed
// pattern each. Every problem is reported, each naming its toolset.
func NewToolsets(sets []Toolset) (Toolsets, error) {
	out := Toolsets{}
	var probs []string
	for _, t := range sets {
		switch {
		case !ToolsetNamePattern.MatchString(t.Name):
			probs = append(probs, fmt.Sprintf("toolset %q: the name must match %s", t.Name, ToolsetNamePattern))
			continue
		case len(t.Tools) == 0:
			probs = append(probs, fmt.Sprintf("toolset %q: tools names no pattern; list the tools (or patterns such as github.*) it holds", t.Name))
		}
		for _, p := range append(slices.Clone(t.Tools), t.Pinned...) {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				probs = append(probs, fmt.Sprintf("toolset %q: the pattern %q is malformed", t.Name, p))
			}
		}
		out[t.Name] = &t
	}
	if len(probs) > 0 {
		slices.Sort(probs)
		return nil, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return out, nil
}

// Names lists the toolsets' names, sorted.
func (ts Toolsets) Names() []string {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Patterns returns the patterns of the named toolsets, together: a key
// bound to toolsets may use the tools they hold. An unknown name is
// reported.
func (ts Toolsets) Patterns(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		t, ok := ts[n]
		if !ok {
			return nil, fmt.Errorf("no toolset is named %q (toolsets: %s)", n, strings.Join(ts.Names(), ", "))
		}
		out = append(out, t.Tools...)
	}
	return out, nil
}
