package consult

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/httpapi"
)

// Options wire a Set into toold.
type Options struct {
	// Launcher runs the CLI providers; needed when one is configured.
	Launcher *launch.Launcher
	// HTTP reaches the API providers; needed when one is configured.
	HTTP *httpapi.Set
	// Registerer receives the consult metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Redact is applied to a synthesis prompt before it leaves toold: it
	// carries other providers' answers, which no input sanitizer saw.
	Redact func(string) string
	// LookupEnv reads toold's environment (default os.LookupEnv): a preset
	// CLI's key found there is injected by the egress proxy (apiKeys).
	LookupEnv func(string) (string, bool)
}

// Set is the consultation tools of one configuration.
type Set struct {
	providers map[string]*provider // the enabled ones
	cfg       Config
	timeouts  Timeouts
	maxPrompt int
	disc      *discovery
	redact    func(string) string
	tools     []tools.Tool
}

// New checks cfg (as Check does) and builds its providers and tools. A
// CLI that is not installed is no error: calls report it as not_found.
func New(cfg Config, opts Options) (*Set, error) {
	probs := &ConfigError{Section: "consult"}
	specs := cfg.specs(probs)
	if err := probs.Err(); err != nil {
		return nil, err
	}
	s := &Set{providers: map[string]*provider{}, cfg: cfg, timeouts: cfg.Timeouts.withDefaults(),
		maxPrompt: cfg.maxPrompt(), redact: opts.Redact}
	ttl := cfg.DetectionTTL
	if ttl <= 0 {
		ttl = DefaultDetectionTTL
	}
	s.disc = newDiscovery(ttl, s.timeouts.Detection)
	m := newMetrics(opts.Registerer)
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		sp := specs[name]
		if !sp.cfg.enabled() {
			continue
		}
		impl, err := build(sp, opts)
		if err != nil {
			probs.Add("providers."+name, "%v", err)
			continue
		}
		slots := sp.cfg.MaxInFlight
		if slots <= 0 {
			slots = DefaultMaxInFlight
		}
		s.providers[name] = &provider{spec: sp, impl: impl, slots: make(chan struct{}, slots), metrics: m}
	}
	if err := probs.Err(); err != nil {
		return nil, err
	}
	if len(s.providers) > 0 {
		s.tools = []tools.Tool{s.consultTool(), s.manyTool(), s.providersTool()}
	}
	return s, nil
}

func build(sp *spec, opts Options) (asker, error) {
	if sp.kind == "api" {
		if opts.HTTP == nil {
			return nil, fmt.Errorf("an api provider needs the HTTP tools' machinery, which toold did not pass")
		}
		return newAPIProvider(sp, opts.HTTP)
	}
	if opts.Launcher == nil {
		return nil, fmt.Errorf("a cli provider needs the command sandbox, which toold did not pass")
	}
	sb := sp.cfg.Sandbox
	if k, ok := apiKeys[sp.preset]; ok {
		env := opts.LookupEnv
		if env == nil {
			env = os.LookupEnv
		}
		if inj, ok := k.injected(sb, presets[sp.preset].Sandbox.EnvAllow, env); ok {
			r, err := opts.Launcher.Runner(sandboxOf(inj))
			if err == nil {
				return &cliProvider{s: sp, runner: r}, nil
			}
			if !errors.Is(err, launch.ErrNoAllowList) {
				return nil, fmt.Errorf("sandbox (the key injected by the egress proxy): %w", err)
			}
			// This containment cannot hold the CLI to a proxy (none,
			// Windows' job): the key stays in the CLI's environment, as
			// the provider says.
		}
	}
	r, err := opts.Launcher.Runner(sandboxOf(sb))
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return &cliProvider{s: sp, runner: r}, nil
}

// Tools returns consult, consult_many and consult_providers, or nothing
// when no provider is enabled.
func (s *Set) Tools() []tools.Tool { return slices.Clone(s.tools) }

// Describe returns one line per enabled provider for the start-up log.
func (s *Set) Describe() []string {
	var out []string
	for _, name := range s.names() {
		p := s.providers[name]
		line := name + " (" + p.spec.kind + "): "
		for _, k := range slices.Sorted(maps.Keys(p.impl.where())) {
			line += fmt.Sprintf("%s %v; ", k, p.impl.where()[k])
		}
		out = append(out, strings.TrimSuffix(line, "; "))
	}
	return out
}

// names are the enabled providers, sorted.
func (s *Set) names() []string { return slices.Sorted(maps.Keys(s.providers)) }

// checkPrompt refuses an empty prompt and one over the cap, before
// anything runs.
func (s *Set) checkPrompt(prompt string) error {
	switch {
	case strings.TrimSpace(prompt) == "":
		return fieldError("/prompt", "is empty: say what the assistant should answer")
	case len(prompt) > s.maxPrompt:
		return fieldError("/prompt", fmt.Sprintf("is %d bytes, over the cap of %d (consult.max_prompt_bytes): "+
			"send the relevant part", len(prompt), s.maxPrompt))
	}
	return nil
}

func fieldError(pointer, msg string) error {
	e := tools.Errorf(tools.ValidationError, "%s %s", pointer, msg)
	e.Fields = []tools.FieldError{{Pointer: pointer, Message: msg}}
	return e
}

// timeoutFor is a provider's timeout for an operation, shortened (never
// lengthened) by the call's timeout argument in seconds.
func (s *Set) timeoutFor(p *provider, operation string, asked float64) time.Duration {
	t := s.timeouts.Consultation
	if p.spec.cfg.Timeout > 0 {
		t = p.spec.cfg.Timeout
	}
	if operation == "review" {
		t = s.timeouts.Review
	}
	if asked > 0 {
		t = min(t, time.Duration(asked*float64(time.Second)))
	}
	return t
}

// budget is what of t fits before the call's deadline, keeping back a
// reserve (a tenth of what is left, at most a second) so a provider
// stopped at its timeout — a CLI ignoring SIGTERM gets the command
// sandbox's kill grace — is still answered as a Response rather than by
// the pipeline's timeout.
func budget(ctx context.Context, t time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return t
	}
	left := time.Until(dl)
	return min(t, left-min(time.Second, left/10))
}

// model chooses the model: the call's (checked against the provider's
// list), else the failure type's, else the default ("" lets a CLI choose).
func (p *provider) model(asked, failureType string) (string, error) {
	models := p.spec.cfg.Models
	if asked != "" {
		switch {
		case !modelName.MatchString(asked):
			return "", fieldError("/model", fmt.Sprintf("%q is not a model name", asked))
		case len(models) > 0 && !slices.Contains(models, asked):
			return "", fieldError("/model", fmt.Sprintf("%q is not a model of %s (models: %s)", asked, p.spec.name,
				strings.Join(models, ", ")))
		}
		return asked, nil
	}
	if m := p.spec.cfg.FailureModels[failureType]; m != "" {
		return m, nil
	}
	return p.spec.defaultModel, nil
}

// routeOrder is the providers to try for a failure type, and why.
func (s *Set) routeOrder(failureType string) ([]string, string) {
	if list, ok := s.cfg.Routing[failureType]; ok && failureType != "" {
		return list, "routing." + failureType
	}
	if list, ok := s.cfg.Routing["default"]; ok {
		return list, "routing.default"
	}
	return s.names(), "every enabled provider, by name"
}

// route picks the first available provider for a failure type; skipped
// lists the ones before it and why.
func (s *Set) route(ctx context.Context, failureType string) (*provider, []map[string]any, string, error) {
	order, by := s.routeOrder(failureType)
	var skipped []map[string]any
	for _, name := range order {
		p := s.providers[name]
		if p == nil {
			skipped = append(skipped, map[string]any{"provider": name, "reason": "disabled"})
			continue
		}
		a := s.disc.check(ctx, p, false)
		if a.usable() {
			return p, skipped, by, nil
		}
		skipped = append(skipped, map[string]any{"provider": name, "reason": cmp.Or(a.Detail, "not available")})
	}
	var reasons []string
	for _, sk := range skipped {
		reasons = append(reasons, fmt.Sprintf("%s: %s", sk["provider"], sk["reason"]))
	}
	return nil, skipped, by, tools.NewUserError("no provider of %s is available (%s)", by, strings.Join(reasons, "; ")).
		WithCode(tools.CodeNoProvider).WithSuggestion("consult_providers shows what is installed and working; name a " +
		"provider, or ask the operator to install one")
}

// streamTo labels a provider's output on the call's stream; nil when
// nobody streams.
func streamTo(call *tools.Call, label string) func(string) {
	if !call.Streaming() {
		return nil
	}
	return func(data string) { call.Emit(label, data) }
}
