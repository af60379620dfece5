package consult

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/launch"
)

// decode reads a consult section as toold's loader does (unknown keys
// refused).
func decode(t *testing.T, src string) Config {
	t.Helper()
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCheck: every problem the field rules cannot see, each at its path.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // "path: part of the message"
	}{
		{"routing names an unconfigured provider", `
providers: {gemini: {}, codex: {}}
routing: {assertion: [gemini, gemnii], import: [cursor-agent]}
synthesis: claud`, []string{
			`consult.routing.assertion[1]: "gemnii" is not a configured provider (did you mean "gemini"?)`,
			`consult.routing.import[0]: "cursor-agent" is not a configured provider (providers: codex, gemini)`,
			`consult.synthesis: "claud" is not a configured provider`}},
		{"no provider at all", `routing: {assertion: [gemini]}`,
			[]string{`consult.routing.assertion[0]: "gemini" is not a configured provider (no provider is configured)`}},
		{"a cli without a command", `providers: {mine: {models: [a]}}`,
			[]string{"consult.providers.mine.command: is required"}},
		{"json output without an answer path", `providers: {mine: {command: x, output: json}}`,
			[]string{"consult.providers.mine.answer_path: is required with output: json"}},
		{"a bad path", `providers: {mine: {command: x, output: json, answer_path: "a..b"}}`,
			[]string{`consult.providers.mine.answer_path: "a..b" has an empty segment`}},
		{"an api without model or URL", `providers: {local: {kind: api}}`, []string{
			"consult.providers.local.base_url: is required for an api provider",
			"consult.providers.local.default_model: is required for an api provider"}},
		{"an api URL with a query", `providers: {local: {base_url: "http://127.0.0.1:1/v1?x=1", model: m}}`,
			[]string{"consult.providers.local.base_url: must be scheme://host[:port]/path"}},
		{"cli keys on an api", `providers: {local: {base_url: "http://h/v1", model: m, command: x, prompt: arg}}`, []string{
			"consult.providers.local.command: is for cli providers", "consult.providers.local.prompt: is for cli providers"}},
		{"api keys on a cli", `providers: {gemini: {api_key: k, allow: [127.0.0.1]}}`, []string{
			"consult.providers.gemini.allow: is for api providers", "consult.providers.gemini.api_key: is for api providers"}},
		{"models that disagree", `
providers:
  gemini: {models: [pro], default_model: flash, failure_models: {timeout: ultra}}
  local: {base_url: "http://h/v1", model: a, default_model: b}`, []string{
			`consult.providers.gemini.default_model: "flash" is not one of models (pro)`,
			`consult.providers.gemini.failure_models.timeout: "ultra" is not one of models (pro)`,
			`consult.providers.local.model: model and default_model say different things`}},
		{"a model that is an option", `providers: {gemini: {models: ["-rf"]}}`,
			[]string{`consult.providers.gemini.models[0]: "-rf" is not a model name`}},
		{"a bad name", `providers: {"no spaces": {command: x}}`,
			[]string{"consult.providers.no spaces: a provider name is 1-32 letters"}},
		{"a prompt too large for an argument", `
max_prompt_bytes: 200000
providers: {codex: {}, gemini: {}}`, []string{
			"consult.providers.codex.prompt: a prompt of max_prompt_bytes (200000) cannot be passed as one argument"}},
		{"a relative read-only path", `providers: {mine: {command: x, sandbox: {read_only_paths: [opt/cli]}}}`,
			[]string{`consult.providers.mine.sandbox: read_only_paths: "opt/cli" is not absolute`}},
		{"an api with a preset", `providers: {gemini: {base_url: "http://h/v1", model: m}}`, nil},
		{"a preset under another name", `providers: {g2: {preset: gemini, command: /opt/gemini/bin/gemini}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decode(t, tc.src).Check()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("unexpected problems:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems lack %q:\n%s", w, got)
				}
			}
			if n := strings.Count(got, "\n") + 1; err != nil && n != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", n, len(tc.want), got)
			}
		})
	}
}

// TestNewRefusesWhatCheckRefuses: New reports the same problems, so a
// Set is never built from a section -check-config would refuse; and a CLI
// that is not installed is no problem at all.
func TestNewRefusesWhatCheckRefuses(t *testing.T) {
	e := newEnv(t)
	_, err := e.tryBuild(decode(t, "providers: {gemini: {}}\nrouting: {assertion: [gemnii]}"))
	if err == nil || !strings.Contains(err.Error(), `consult.routing.assertion[0]: "gemnii" is not a configured provider`) {
		t.Errorf("New: %v", err)
	}
	r := e.build(decode(t, "providers: {gemini: {}, codex: {}, cursor-agent: {}, claude: {}}"))
	if len(r.set.Tools()) != 3 {
		t.Errorf("%d tools", len(r.set.Tools()))
	}
	lines := r.set.Describe()
	if len(lines) != 4 {
		t.Errorf("describe: %d lines for 4 providers: %q", len(lines), lines)
	}
	for _, line := range lines {
		if !strings.Contains(line, "containment") {
			t.Errorf("describe: %q", line)
		}
	}
	// Nothing enabled: no tool.
	off := false
	r = e.build(Config{Providers: map[string]ProviderConfig{"gemini": {Enabled: &off}}})
	if len(r.set.Tools()) != 0 {
		t.Errorf("%d tools with every provider disabled", len(r.set.Tools()))
	}
}

// TestPresets: each CLI's built-in invocation, and a setting replacing the
// preset's.
func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pc    ProviderConfig
		model string
		argv  string
		stdin bool
	}{
		{"gemini", ProviderConfig{}, "gemini-2.5-pro", "gemini --output-format json -m gemini-2.5-pro", true},
		{"codex", ProviderConfig{}, "", "codex exec --skip-git-repo-check -- PROMPT", false},
		{"cursor-agent", ProviderConfig{}, "gpt-5", "cursor-agent -p --output-format json --model gpt-5 -- PROMPT", false},
		{"claude", ProviderConfig{}, "sonnet", "claude -p --output-format json --model sonnet", true},
		{"gemini", ProviderConfig{Args: []string{"--yolo"}, Prompt: "arg", PromptFlag: "--prompt="}, "",
			"gemini --yolo --prompt=PROMPT", false},
		{"codex", ProviderConfig{Prompt: "arg", PromptFlag: "-p"}, "o3", "codex exec --skip-git-repo-check -m o3 -p PROMPT", false},
	} {
		probs := &ConfigError{Section: "consult"}
		s := resolve(tc.name, tc.pc, probs)
		if err := probs.Err(); err != nil {
			t.Fatal(err)
		}
		argv, stdin := (&cliProvider{s: s}).argv("PROMPT", tc.model)
		if got := strings.Join(argv, " "); got != tc.argv || (stdin != nil) != tc.stdin {
			t.Errorf("%s: %q (stdin %v), want %q (stdin %v)", tc.name, got, stdin != nil, tc.argv, tc.stdin)
		}
		if stdin != nil && *stdin != "PROMPT" {
			t.Errorf("%s: stdin %q", tc.name, *stdin)
		}
	}
	s := resolve("gemini", ProviderConfig{}, &ConfigError{})
	if s.answer.String() != "response" || s.errs.String() != "error" || !strings.Contains(strings.Join(s.cfg.Sandbox.EnvAllow, " "), "GEMINI_API_KEY") ||
		strings.Join(s.cfg.VersionArgs, " ") != "--version" {
		t.Errorf("gemini preset: %+v", s)
	}
}

func TestBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b := budget(ctx, time.Minute); b > 9*time.Second || b < 8*time.Second {
		t.Errorf("10s left, a minute asked: %v", b)
	}
	if b := budget(ctx, time.Second); b != time.Second {
		t.Errorf("10s left, a second asked: %v", b)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if b := budget(short, time.Minute); b > 450*time.Millisecond || b < 400*time.Millisecond {
		t.Errorf("500ms left: %v", b)
	}
	if b := budget(t.Context(), time.Minute); b != time.Minute {
		t.Errorf("no deadline: %v", b)
	}
}

// TestSandboxOf: a CLI's sandbox is the command tools' keys as written,
// with the network on unless it says network: false, and its path as
// PATH unless env sets one; the configuration is not changed.
func TestSandboxOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sb      Sandbox
		network bool
		path    string
	}{
		{"defaults", Sandbox{}, true, ""},
		{"network off", Sandbox{Sandbox: launch.Sandbox{Network: launch.NetworkOff()}}, false, ""},
		{"path", Sandbox{Path: []string{"/opt/cli/bin", "/usr/bin"}}, true, "/opt/cli/bin:/usr/bin"},
		{"env's PATH wins", Sandbox{Sandbox: launch.Sandbox{Env: map[string]string{"PATH": "/x"}}, Path: []string{"/y"}}, true, "/x"},
	} {
		before := fmt.Sprint(tc.sb.Env)
		got := sandboxOf(tc.sb)
		if got.Network == nil || got.Network.On() != tc.network || got.Env["PATH"] != tc.path {
			t.Errorf("%s: network %v, PATH %q; want %v, %q", tc.name, got.Network, got.Env["PATH"], tc.network, tc.path)
		}
		if fmt.Sprint(tc.sb.Env) != before {
			t.Errorf("%s: the configuration's env changed to %v", tc.name, tc.sb.Env)
		}
	}
}
