package consult

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/toold/toold/internal/tools"
)

type providersIn struct {
	Refresh bool `json:"refresh,omitempty" desc:"Check every provider now instead of using the answers remembered from the last check."`
}

// providerInfo is one provider as discovery shows it.
type providerInfo struct {
	Name    string `json:"name"`
	Kind    string `json:"kind" desc:"cli or api"`
	Enabled bool   `json:"enabled"`
	// Installed: found on the sandbox's PATH (an api is always installed).
	Installed bool `json:"installed"`
	// Working: the version flag (an api's models list) answered within
	// the detection timeout.
	Working   bool    `json:"working"`
	Version   *string `json:"version" desc:"What the version flag printed."`
	Detail    *string `json:"detail" desc:"Why it is not working."`
	CheckedAt *string `json:"checked_at" desc:"When it was checked; checks are remembered for detection_ttl."`
	// Models are the configured ones; AvailableModels what an api lists.
	Models          []string          `json:"models"`
	AvailableModels []string          `json:"available_models,omitempty"`
	DefaultModel    *string           `json:"default_model"`
	FailureModels   map[string]string `json:"failure_models,omitempty"`
	Timeout         float64           `json:"timeout" desc:"Seconds a consultation may take."`
	MaxInFlight     int               `json:"max_in_flight"`
	Where           map[string]any    `json:"where,omitempty" desc:"command and containment of a cli, endpoint of an api"`
	Breaker         *string           `json:"breaker,omitempty" desc:"An api endpoint's circuit breaker: closed, half_open or open."`
}

type providersOut struct {
	Providers      []providerInfo      `json:"providers"`
	Routing        map[string][]string `json:"routing"`
	Synthesis      *string             `json:"synthesis" desc:"The synthesis provider; null: the first that answered."`
	Timeouts       map[string]float64  `json:"timeouts" desc:"Seconds per operation: detection, consultation, review, synthesis."`
	MaxPromptBytes int                 `json:"max_prompt_bytes"`
}

func (s *Set) providersTool() tools.Tool {
	spec := tools.Spec{
		Name:  "consult_providers",
		Title: "List AI assistants to consult",
		Description: "Lists the AI assistants consult and consult_many can ask: whether each is enabled, installed " +
			"and working, its models, and the routing table by failure type.",
		Instructions: "Use it before consult or consult_many when you need to know which providers and models " +
			"exist; checks are remembered for a while, refresh checks again.",
		Category: tools.Subtask,
		Effects:  tools.Effects{ReadOnly: true, Idempotent: true},
		Examples: []tools.Example{{Description: "what can be consulted", Arguments: []byte(`{}`)}},
	}
	return tools.Typed(spec, s.listProviders)
}

func (s *Set) listProviders(ctx context.Context, _ *tools.Call, in providersIn) (providersOut, error) {
	out := providersOut{Routing: s.cfg.Routing, Synthesis: strPtr(s.cfg.Synthesis), MaxPromptBytes: s.maxPrompt,
		Timeouts: map[string]float64{"detection": seconds(s.timeouts.Detection), "consultation": seconds(s.timeouts.Consultation),
			"review": seconds(s.timeouts.Review), "synthesis": seconds(s.timeouts.Synthesis)}}
	if out.Routing == nil {
		out.Routing = map[string][]string{}
	}
	enabled := make([]*provider, 0, len(s.providers))
	for _, n := range s.names() {
		enabled = append(enabled, s.providers[n])
	}
	found := s.disc.checkAll(ctx, enabled, in.Refresh)
	for i, p := range enabled {
		out.Providers = append(out.Providers, s.info(p, found[i]))
	}
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Providers)) {
		if s.providers[name] == nil {
			out.Providers = append(out.Providers, providerInfo{Name: name, Kind: providerKind(s.cfg.Providers[name]),
				Detail: strPtr("disabled in the configuration"), Models: nonNil(s.cfg.Providers[name].Models)})
		}
	}
	slices.SortFunc(out.Providers, func(a, b providerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Set) info(p *provider, a availability) providerInfo {
	cfg := p.spec.cfg
	in := providerInfo{Name: p.spec.name, Kind: p.spec.kind, Enabled: true, Installed: a.Installed, Working: a.Working,
		Version: strPtr(a.Version), Detail: strPtr(a.Detail), Models: nonNil(cfg.Models), AvailableModels: a.Models,
		DefaultModel: strPtr(p.spec.defaultModel), FailureModels: cfg.FailureModels, MaxInFlight: cap(p.slots),
		Timeout: seconds(s.timeoutFor(p, "consultation", 0)), Where: p.impl.where()}
	if !a.CheckedAt.IsZero() {
		in.CheckedAt = strPtr(a.CheckedAt.UTC().Format(time.RFC3339))
	}
	if api, ok := p.impl.(*apiProvider); ok {
		in.Breaker = strPtr(api.upstream().Breaker)
	}
	return in
}

// nonNil lists nothing as [], not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
