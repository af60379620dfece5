package main

import (
	"context"
	"net/http"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools/catalog"
)

// searchTools answers the search_tools tool from the registry's current
// snapshot, in the caller's view; the search tool itself is never a match.
func (a *app) searchTools(_ context.Context, q catalog.Query) []catalog.Match {
	hits := a.reg.Load().Search(q.Text, q.Limit, func(e *registry.Entry) bool {
		return e.Spec.Name != catalog.Name && (q.Allowed == nil || q.Allowed(e.Spec.Name))
	})
	out := make([]catalog.Match, len(hits))
	for i, h := range hits {
		out[i] = catalog.Match{Name: h.Entry.FunctionName(), Description: h.Entry.Spec.Description, Score: h.Score}
		if q.Schemas {
			out[i].InputSchema = h.Entry.Spec.Parameters
		}
	}
	return out
}

// toolsets checks the configured toolsets. Each holds search_tools too:
// a client of /mcp/<toolset> finds the toolset's tools with it.
func toolsets(cfg *config.Config) (registry.Toolsets, error) {
	sets, err := registry.NewToolsets(cfg.ToolsetList())
	if err != nil {
		return nil, &config.Error{Problems: []config.Problem{{Path: "toolsets", Message: err.Error()}}}
	}
	for _, t := range sets {
		t.Tools = append(t.Tools, catalog.Name)
	}
	return sets, nil
}

// bindToolsets narrows each key bound to toolsets (auth.keys[].toolsets)
// to the tools they hold, as the registry serves them when a call comes.
func (a *app) bindToolsets(ks []auth.Key, sets registry.Toolsets) []auth.Key {
	for i, k := range a.cfg.Auth.Keys {
		if len(k.Toolsets) == 0 {
			continue
		}
		patterns, _ := sets.Patterns(k.Toolsets) // checked with the configuration
		ks[i].Within = func(tool string) bool {
			e, ok := a.reg.Load().Lookup(tool)
			return ok && e.Matches(patterns)
		}
	}
	return ks
}

// mcpToolsets are the handlers of /mcp/<toolset>.
func (a *app) mcpToolsets(sets registry.Toolsets) map[string]http.Handler {
	out := map[string]http.Handler{}
	for name := range sets {
		if h, ok := a.mcp.ToolsetHandler(name); ok {
			out[name] = h
		}
	}
	return out
}
