package dispatch

import (
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/suggest"
)

// nearest returns the tool name closest to name, among the tools the caller
// may use, when it is close enough to be a likely typo.
func nearest(name string, reg *registry.Registry, allowed func(string) bool) string {
	var names []string
	for _, e := range reg.Entries() {
		if allowed == nil || allowed(e.Spec.Name) {
			names = append(names, e.Spec.Name)
		}
	}
	return suggest.Closest(name, names, len(name)/2+1)
}
