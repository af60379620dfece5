package registry

import (
	"sync"

	"github.com/toold/toold/internal/policy"
)

// View is what one caller sees of a snapshot: the tools its credentials
// let it use (Allowed), within a toolset when it came through one (Set),
// that the policy lets it list (Listing: list is allowed and some call
// could be). Every listing — GET /tools, /tools/search, search_tools,
// MCP tools/list, the console — filters through one, so a way in cannot
// show what another hides.
type View struct {
	// Allowed reports whether the caller may use a tool by name; nil
	// allows all.
	Allowed func(tool string) bool
	// Set narrows the view to a toolset; nil: the whole catalog.
	Set *Toolset
	// Listing is the policy's listing for the caller, its way in and
	// the time (policy.Engine.Listing); nil lists all (no policy
	// configured).
	Listing *policy.Listing
	// Toolsets are the configured toolsets, which the policy sees as
	// the tool's toolsets.
	Toolsets Toolsets
}

// Shows reports whether the view shows the tool.
func (v *View) Shows(e *Entry) bool {
	if v.Allowed != nil && !v.Allowed(e.Spec.Name) || v.Set != nil && !v.Set.Contains(e) {
		return false
	}
	return v.Listing == nil || v.Listing.Shows(e.PolicyResource(v.Toolsets))
}

// Visible returns the snapshot's tools the view shows, sorted by name:
// one decision per tool (O(tools)).
func (r *Registry) Visible(v *View) []*Entry {
	var out []*Entry
	for _, e := range r.entries {
		if v.Shows(e) {
			out = append(out, e)
		}
	}
	return out
}

// policyMemo is an entry's resource as policies see it, built once.
type policyMemo struct {
	once sync.Once
	res  *policy.Resource
}

// PolicyResource is the tool as policies see it (toold::Tool): its kind
// (category), its upstream server, its effects, and the toolsets of sets
// that hold it. It is built once per entry: a registry's tools and the
// configured toolsets go together.
func (e *Entry) PolicyResource(sets Toolsets) *policy.Resource {
	e.policy.once.Do(func() {
		t := policy.Tool{Name: e.Spec.Name, Kind: string(e.Spec.Category), ReadOnly: e.Spec.Effects.ReadOnly,
			Destructive: e.Spec.Effects.Destructive}
		if e.Spec.Category == "mcp" {
			t.Server = e.Spec.Source
		}
		for _, name := range sets.Names() {
			if sets[name].Contains(e) {
				t.Toolsets = append(t.Toolsets, name)
			}
		}
		e.policy.res = policy.NewResource(t)
	})
	return e.policy.res
}
