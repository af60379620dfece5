package registry

import (
	"slices"
	"strings"
)

// Integration is the group a tool belongs to in a description of a
// catalog: its source (the upstream server that hosts it), else the
// server part of its name (github of github.list_issues or
// github__list_issues), else "" for toold's own tools.
func (e *Entry) Integration() string {
	if e.Spec.Source != "" {
		return e.Spec.Source
	}
	for _, sep := range []string{".", "__"} {
		if srv, _, ok := strings.Cut(e.Spec.Name, sep); ok && srv != "" {
			return srv
		}
	}
	return ""
}

// Integrations counts entries by Integration.
func Integrations(entries []*Entry) map[string]int {
	out := map[string]int{}
	for _, e := range entries {
		out[e.Integration()]++
	}
	return out
}

// WithDescription returns a copy of the entry that renders with
// description d: for a tool whose description depends on who lists it
// (search_tools describes the caller's catalog). The copy is for
// rendering; calls go to the registry's entry.
func (e *Entry) WithDescription(d string) *Entry {
	c := &Entry{Tool: e.Tool, Spec: e.Spec, params: e.params, output: e.output, example: e.example, fname: e.fname}
	c.Spec.Description = d
	return c
}

// Described returns entries (a caller's view) with the tool named tool, if
// present, replaced by a copy whose description is describe's of the
// view's other tools, by integration: search_tools says what the caller
// can find with it.
func Described(entries []*Entry, tool string, describe func(map[string]int) string) []*Entry {
	i := slices.IndexFunc(entries, func(e *Entry) bool { return e.Spec.Name == tool })
	if i < 0 {
		return entries
	}
	others := Integrations(slices.Delete(slices.Clone(entries), i, i+1))
	out := slices.Clone(entries)
	out[i] = entries[i].WithDescription(describe(others))
	return out
}
