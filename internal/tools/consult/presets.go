package consult

import (
	"cmp"
	"maps"
	"slices"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/launch"
)

// presets are the built-in settings of the CLIs the source document
// consults, plus claude. Each runs the CLI once per consultation without a
// terminal and reads its answer from stdout; every field can be overridden
// in the provider's configuration. Flags follow the CLIs' documented
// non-interactive modes at the time of writing:
//
//   - gemini: headless when stdin is not a terminal; the prompt on stdin,
//     --output-format json wraps the answer as {"response", "stats",
//     "error"}; -m picks the model.
//   - codex: `codex exec` takes the prompt as its last argument (after
//     "--") and prints only the final message on stdout (progress goes to
//     stderr); --skip-git-repo-check lets it run in a workspace that is not
//     a git repository; -m picks the model.
//   - cursor-agent: -p prints instead of opening its interface; the prompt
//     is the last argument, after "--"; --output-format json answers
//     {"type": "result", "is_error", "result", …}.
//   - claude: -p prints; the prompt on stdin; --output-format json answers
//     {"type": "result", "is_error", "result", …}.
//
// EnvAllow passes each CLI's own credentials and nothing else of toold's
// environment.
var presets = map[string]ProviderConfig{
	"gemini": {
		Command: "gemini", Args: []string{"--output-format", "json"}, Prompt: "stdin", ModelFlag: "-m",
		Output: "json", AnswerPath: "response", ErrorPath: "error",
		Sandbox: envAllow("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
			"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS"),
	},
	"codex": {
		Command: "codex", Args: []string{"exec", "--skip-git-repo-check"}, Prompt: "arg", ModelFlag: "-m", Output: "text",
		Sandbox: envAllow("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"),
	},
	"cursor-agent": {
		Command: "cursor-agent", Args: []string{"-p", "--output-format", "json"}, Prompt: "arg",
		ModelFlag: "--model", Output: "json", AnswerPath: "result", ErrorPath: "is_error",
		Sandbox: envAllow("CURSOR_API_KEY"),
	},
	"claude": {
		Command: "claude", Args: []string{"-p", "--output-format", "json"}, Prompt: "stdin",
		ModelFlag: "--model", Output: "json", AnswerPath: "result", ErrorPath: "is_error",
		Sandbox: envAllow("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK",
			"CLAUDE_CODE_USE_VERTEX"),
	},
}

// apiKeys are the presets whose CLI speaks HTTPS to its vendor through a
// proxy (HTTPS_PROXY) and trusts the run's bundle (NODE_EXTRA_CA_CERTS
// for the Node CLIs, SSL_CERT_FILE for codex): when toold's environment
// holds the key and the provider's sandbox does not set network itself,
// the key moves from the CLI's environment to the egress proxy, which
// adds it to each request to the vendor's API host. The CLI gets a
// placeholder in the variable (it refuses to start without one), so a
// prompt that makes it print its environment prints no key. cursor-agent
// is not here: its key opens a session with endpoints of its own, not a
// header a proxy can add; it keeps the variable.
var apiKeys = map[string]apiKey{
	"claude": {Env: "ANTHROPIC_API_KEY", BaseURL: "ANTHROPIC_BASE_URL", Host: "api.anthropic.com", Header: "X-Api-Key"},
	"gemini": {Env: "GEMINI_API_KEY", Host: "generativelanguage.googleapis.com", Header: "X-Goog-Api-Key"},
	"codex":  {Env: "OPENAI_API_KEY", BaseURL: "OPENAI_BASE_URL", Host: "api.openai.com", Header: "Authorization", Scheme: "Bearer "},
}

// apiKey is how a preset's CLI sends its key.
type apiKey struct {
	Env     string // the variable the CLI reads it from
	BaseURL string // a variable naming another endpoint: the key then stays in the environment
	Host    string // the vendor's API host
	Header  string
	Scheme  string // before the key in the header's value
}

// keyPlaceholder is what the CLI reads in place of its key.
const keyPlaceholder = "toold-injects-this-key-at-its-egress-proxy"

// injected is the sandbox of a preset CLI whose key the proxy injects,
// or false when the key stays in the environment: the provider sets its
// own network or env_allow, the key is not in toold's environment, or an
// endpoint of its own is.
func (k apiKey) injected(sb Sandbox, presetAllow []string, env func(string) (string, bool)) (Sandbox, bool) {
	key, ok := env(k.Env)
	if !ok || key == "" || sb.Network != nil || !slices.Equal(sb.EnvAllow, presetAllow) {
		return sb, false
	}
	if k.BaseURL != "" {
		if v, set := env(k.BaseURL); set && v != "" {
			return sb, false
		}
	}
	sb.Network = launch.AllowList(egress.Policy{Allow: []string{k.Host},
		Inject: []egress.Inject{{Host: k.Host, Header: k.Header, Value: k.Scheme + key}}})
	sb.EnvAllow = slices.DeleteFunc(slices.Clone(sb.EnvAllow), func(n string) bool { return n == k.Env })
	sb.Env = maps.Clone(sb.Env)
	if sb.Env == nil {
		sb.Env = map[string]string{}
	}
	sb.Env[k.Env] = keyPlaceholder
	return sb, true
}

// envAllow is a preset's sandbox: the CLI's own variables passed on.
func envAllow(names ...string) Sandbox {
	return Sandbox{Sandbox: launch.Sandbox{EnvAllow: names}}
}

// overPreset returns pc with every field it leaves unset taken from the
// preset: a set field, list or map replaces the preset's.
func overPreset(pc, preset ProviderConfig) ProviderConfig {
	pc.Command = cmp.Or(pc.Command, preset.Command)
	pc.Prompt = cmp.Or(pc.Prompt, preset.Prompt)
	pc.PromptFlag = cmp.Or(pc.PromptFlag, preset.PromptFlag)
	pc.ModelFlag = cmp.Or(pc.ModelFlag, preset.ModelFlag)
	pc.Output = cmp.Or(pc.Output, preset.Output)
	pc.AnswerPath = cmp.Or(pc.AnswerPath, preset.AnswerPath)
	pc.ErrorPath = cmp.Or(pc.ErrorPath, preset.ErrorPath)
	if pc.Args == nil {
		pc.Args = preset.Args
	}
	if pc.VersionArgs == nil {
		pc.VersionArgs = preset.VersionArgs
	}
	if pc.Sandbox.EnvAllow == nil {
		pc.Sandbox.EnvAllow = preset.Sandbox.EnvAllow
	}
	return pc
}
