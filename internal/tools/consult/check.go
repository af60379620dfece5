package consult

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/toold/toold/internal/problems"
	"github.com/toold/toold/internal/suggest"
)

// ConfigError lists every problem of a consult section, each at its path
// relative to the section ("providers.gemini.output", "routing.assertion[1]").
type ConfigError = problems.List

// Patterns of names that reach argv, metrics labels and stream names.
var (
	providerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$`)
	modelName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)
)

// spec is a provider's configuration resolved: preset applied, kind
// decided, defaults filled, paths parsed.
type spec struct {
	name         string
	preset       string // the preset applied, if any
	kind         string // cli or api
	cfg          ProviderConfig
	defaultModel string
	answer, errs path
}

// Check reports what the field rules cannot: providers that cannot work
// as configured, routing and synthesis naming providers that are not
// configured, models outside a provider's list. It is what -check-config
// reports for the section.
func (c Config) Check() error {
	probs := &ConfigError{Section: "consult"}
	c.specs(probs)
	return probs.Err()
}

// specs resolves every provider, adding each problem to probs.
func (c Config) specs(probs *ConfigError) map[string]*spec {
	out := map[string]*spec{}
	maxPrompt := c.maxPrompt()
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		s := resolve(name, c.Providers[name], probs)
		out[name] = s
		if s.kind == "cli" && s.cfg.Prompt == "arg" && maxPrompt > MaxArgPromptBytes {
			probs.Add("providers."+name+".prompt", "a prompt of max_prompt_bytes (%d) cannot be passed as one argument "+
				"(at most %d bytes): use prompt: stdin, or lower max_prompt_bytes", maxPrompt, MaxArgPromptBytes)
		}
	}
	names := slices.Sorted(maps.Keys(c.Providers))
	for _, ft := range slices.Sorted(maps.Keys(c.Routing)) {
		for i, n := range c.Routing[ft] {
			if _, ok := c.Providers[n]; !ok {
				probs.Add(fmt.Sprintf("routing.%s[%d]", ft, i), "%q is not a configured provider%s", n, known(n, names))
			}
		}
	}
	if c.Synthesis != "" {
		if _, ok := c.Providers[c.Synthesis]; !ok {
			probs.Add("synthesis", "%q is not a configured provider%s", c.Synthesis, known(c.Synthesis, names))
		}
	}
	return out
}

func (c Config) maxPrompt() int {
	if c.MaxPromptBytes > 0 {
		return c.MaxPromptBytes
	}
	return DefaultMaxPromptBytes
}

// known says which providers exist, or the one meant.
func known(name string, names []string) string {
	if best := suggest.Closest(name, names, 2); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(names) == 0 {
		return " (no provider is configured)"
	}
	return " (providers: " + strings.Join(names, ", ") + ")"
}

// providerKind is a provider's kind: the one it sets, else api when it
// has a base_url, else cli. consult_providers shows a disabled provider's
// by the same rule.
func providerKind(pc ProviderConfig) string {
	switch {
	case pc.Kind != "":
		return pc.Kind
	case pc.BaseURL != "":
		return "api"
	}
	return "cli"
}

// resolve applies the preset and the defaults to one provider.
func resolve(name string, pc ProviderConfig, probs *ConfigError) *spec {
	at := "providers." + name
	if !providerName.MatchString(name) {
		probs.Add(at, "a provider name is 1-32 letters, digits, - and _, starting with a letter or digit")
	}
	s := &spec{name: name, kind: providerKind(pc)}
	preset := pc.Preset
	if _, ok := presets[name]; ok && preset == "" && s.kind == "cli" {
		preset = name
	}
	if s.kind == "api" {
		resolveAPI(at, pc, preset, probs)
	} else {
		s.preset = preset
		pc = overPreset(pc, presets[preset])
		resolveCLI(at, pc, probs, s)
	}
	if pc.VersionArgs == nil {
		pc.VersionArgs = []string{"--version"}
	}
	s.cfg = pc
	s.defaultModel = pc.DefaultModel
	switch {
	case pc.Model != "" && pc.DefaultModel != "" && pc.Model != pc.DefaultModel:
		probs.Add(at+".model", "model and default_model say different things (%q, %q): give one", pc.Model, pc.DefaultModel)
	case pc.Model != "":
		s.defaultModel = pc.Model
	}
	if s.kind == "api" && s.defaultModel == "" {
		probs.Add(at+".default_model", "is required for an api provider: a chat completion names its model")
	}
	checkModels(at, pc, s.defaultModel, probs)
	return s
}

func resolveCLI(at string, pc ProviderConfig, probs *ConfigError, s *spec) {
	if pc.Command == "" {
		probs.Add(at+".command", "is required: the CLI's program (or preset: gemini, codex, cursor-agent or claude)")
	}
	for key, set := range map[string]bool{"base_url": pc.BaseURL != "", "api_key": pc.APIKey != "",
		"allow": len(pc.Allow) > 0, "allow_http": pc.AllowHTTP, "system": pc.System != "", "max_tokens": pc.MaxTokens > 0} {
		if set {
			probs.Add(at+"."+key, "is for api providers; this one is a cli (kind: api, with base_url, makes it an API)")
		}
	}
	if err := pc.Sandbox.Check(); err != nil {
		probs.Add(at+".sandbox", "%v", err)
	}
	var err error
	if pc.Output == "json" {
		if pc.AnswerPath == "" {
			probs.Add(at+".answer_path", "is required with output: json: where the answer is, as in response")
		}
		if s.answer, err = parsePath(pc.AnswerPath); err != nil {
			probs.Add(at+".answer_path", "%v", err)
		}
		if s.errs, err = parsePath(pc.ErrorPath); err != nil {
			probs.Add(at+".error_path", "%v", err)
		}
	} else if pc.AnswerPath != "" || pc.ErrorPath != "" {
		probs.Add(at+".answer_path", "answer_path and error_path read json output; this provider's output is text")
	}
}

func resolveAPI(at string, pc ProviderConfig, preset string, probs *ConfigError) {
	if preset != "" {
		probs.Add(at+".preset", "presets are CLIs; an api provider has none")
	}
	u, err := url.Parse(pc.BaseURL)
	switch {
	case pc.BaseURL == "":
		probs.Add(at+".base_url", "is required for an api provider, as in https://api.openai.com/v1")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		probs.Add(at+".base_url", "%q is not an http(s) URL such as https://api.openai.com/v1", pc.BaseURL)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.ContainsAny(pc.BaseURL, "{}"):
		probs.Add(at+".base_url", "must be scheme://host[:port]/path, without query, fragment, credentials or placeholders")
	}
	for key, set := range map[string]bool{"command": pc.Command != "", "args": pc.Args != nil, "prompt": pc.Prompt != "",
		"prompt_flag": pc.PromptFlag != "", "model_flag": pc.ModelFlag != "", "output": pc.Output != "",
		"answer_path": pc.AnswerPath != "", "error_path": pc.ErrorPath != "", "version_args": pc.VersionArgs != nil} {
		if set {
			probs.Add(at+"."+key, "is for cli providers; this one is an api (it has a base_url)")
		}
	}
}

func checkModels(at string, pc ProviderConfig, def string, probs *ConfigError) {
	for i, m := range pc.Models {
		if !modelName.MatchString(m) {
			probs.Add(fmt.Sprintf("%s.models[%d]", at, i), "%q is not a model name (letters, digits and . _ : / @ + -)", m)
		}
	}
	inList := func(path, m string) {
		switch {
		case !modelName.MatchString(m):
			probs.Add(path, "%q is not a model name (letters, digits and . _ : / @ + -)", m)
		case len(pc.Models) > 0 && !slices.Contains(pc.Models, m):
			probs.Add(path, "%q is not one of models (%s)", m, strings.Join(pc.Models, ", "))
		}
	}
	if def != "" {
		inList(at+".default_model", def)
	}
	for _, ft := range slices.Sorted(maps.Keys(pc.FailureModels)) {
		inList(at+".failure_models."+ft, pc.FailureModels[ft])
	}
}
