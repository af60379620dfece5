package consult

import (
	"cmp"
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools/httpapi"
)

// Config is the `consult:` section of toold's configuration. The zero value
// configures no provider, and then no consultation tool is served.
type Config struct {
	// Providers are the AI tools toold may consult, by name. A provider
	// named gemini, codex, cursor-agent or claude starts from that CLI's
	// built-in preset; any other name says `preset:` or declares a
	// `command` (a CLI) or a `base_url` (an OpenAI-compatible API).
	Providers map[string]ProviderConfig `yaml:"providers" validate:"dive"`
	// Timeouts per operation.
	Timeouts Timeouts `yaml:"timeouts"`
	// Routing lists, per failure type (assertion, exception, import, …),
	// the providers to try in order: consult without a provider takes the
	// first available one. The key "default" is used for calls without a
	// failure type or with one the table lacks; without it, every enabled
	// provider in name order. A disabled provider is skipped.
	Routing map[string][]string `yaml:"routing" validate:"dive,keys,required,endkeys,dive,required"`
	// Synthesis names the provider that merges the answers of
	// consult_many; empty: the first provider of the call that answered.
	Synthesis string `yaml:"synthesis"`
	// MaxPromptBytes caps a prompt (default 64 KiB); longer ones are
	// refused as a validation error before anything runs.
	MaxPromptBytes int `yaml:"max_prompt_bytes" validate:"gte=0,lte=1048576"`
	// DetectionTTL is how long a provider's availability (found on PATH,
	// answering its version flag) is remembered (default 5m).
	DetectionTTL time.Duration `yaml:"detection_ttl" validate:"gte=0"`
}

// Timeouts bound each kind of operation; the call's own deadline (the
// tool's timeout) bounds them all.
type Timeouts struct {
	// Detection bounds a provider's version check (default 5s).
	Detection time.Duration `yaml:"detection" validate:"gte=0"`
	// Consultation bounds one provider's answer (default 90s); a
	// provider's own timeout overrides it.
	Consultation time.Duration `yaml:"consultation" validate:"gte=0"`
	// Review bounds one provider's answer when a call says
	// "operation": "review" (default 600s); raise the tools' timeout too
	// (tools.consult.limits.timeout), or call them async.
	Review time.Duration `yaml:"review" validate:"gte=0"`
	// Synthesis bounds the synthesis of consult_many (default 120s).
	Synthesis time.Duration `yaml:"synthesis" validate:"gte=0"`
}

// ProviderConfig is one provider. The first block is the source
// document's schema; then what a CLI needs, then what a model API needs.
type ProviderConfig struct {
	// Enabled (default true) lets calls use the provider.
	Enabled *bool `yaml:"enabled"`
	// Preset names the built-in CLI preset to start from (gemini, codex,
	// cursor-agent, claude); default: the provider's name, when it is one.
	Preset string `yaml:"preset" validate:"omitempty,oneof=gemini codex cursor-agent claude"`
	// Kind is cli or api; default api when base_url is set, else cli.
	Kind string `yaml:"kind" validate:"omitempty,oneof=cli api"`
	// Command is the CLI's program: a bare name looked up on the
	// sandbox's PATH, or an absolute path.
	Command string `yaml:"command"`
	// Models a call may ask for; empty allows any name a model can have.
	Models []string `yaml:"models" validate:"dive,required"`
	// DefaultModel is used when neither the call nor FailureModels choose
	// one; empty leaves the choice to the CLI. Required for api providers.
	DefaultModel string `yaml:"default_model"`
	// Model is DefaultModel under the name model APIs use; give one of
	// the two.
	Model string `yaml:"model"`
	// Timeout overrides timeouts.consultation for this provider.
	Timeout time.Duration `yaml:"timeout" validate:"gte=0"`
	// FailureModels chooses a model per failure type.
	FailureModels map[string]string `yaml:"failure_models" validate:"dive,keys,required,endkeys,required"`
	// MaxInFlight bounds this provider's runs at once, over all calls and
	// tools (default 4); a run waits for a slot within its own timeout.
	MaxInFlight int `yaml:"max_in_flight" validate:"gte=0,lte=1000"`

	// Args are fixed arguments after the command.
	Args []string `yaml:"args"`
	// Prompt is how the prompt reaches the CLI: stdin or arg.
	Prompt string `yaml:"prompt" validate:"omitempty,oneof=stdin arg"`
	// PromptFlag precedes an arg prompt: "-p" makes two arguments, a flag
	// ending in "=" ("--prompt=") one; empty puts "--" before the prompt.
	// Prefer the last two: a CLI may read a prompt starting with "-" that
	// follows "-p" as an option of its own.
	PromptFlag string `yaml:"prompt_flag"`
	// ModelFlag precedes the model ("--model"); empty: the CLI takes no
	// model and only its own default is used.
	ModelFlag string `yaml:"model_flag"`
	// Output is how stdout is read: text (the answer) or json.
	Output string `yaml:"output" validate:"omitempty,oneof=text json"`
	// AnswerPath is where a json output holds the answer: keys and array
	// indexes separated by dots ("response", "choices.0.message.content").
	AnswerPath string `yaml:"answer_path"`
	// ErrorPath, for json output, is where the CLI reports a failure; a
	// value there other than null, false or "" makes the status error.
	ErrorPath string `yaml:"error_path"`
	// VersionArgs check that the CLI works (default ["--version"]).
	VersionArgs []string `yaml:"version_args"`
	// Sandbox is the CLI's sandbox: the command tools' keys, with the
	// network on unless it says otherwise.
	Sandbox Sandbox `yaml:"sandbox"`

	// BaseURL is an OpenAI-compatible API's base, such as
	// https://api.openai.com/v1 or http://127.0.0.1:11434/v1; toold posts
	// to BaseURL/chat/completions and checks BaseURL/models.
	BaseURL string `yaml:"base_url"`
	// APIKey is sent as a bearer token: ${OPENAI_API_KEY}; empty sends none.
	APIKey string `yaml:"api_key"`
	// Allow and AllowHTTP open the SSRF guard for an internal endpoint
	// (a local model server needs allow: [127.0.0.1], allow_http: true).
	Allow     []string `yaml:"allow" validate:"dive,required"`
	AllowHTTP bool     `yaml:"allow_http"`
	// Retry and Rate are the HTTP tools' (see the http section).
	Retry httpapi.RetryConfig `yaml:"retry"`
	Rate  httpapi.RateConfig  `yaml:"rate"`
	// System, when set, is sent as the system message before the prompt.
	System string `yaml:"system"`
	// MaxTokens and Temperature are sent when set.
	MaxTokens   int      `yaml:"max_tokens" validate:"gte=0"`
	Temperature *float64 `yaml:"temperature" validate:"omitempty,gte=0,lte=2"`
	// MaxResponseBytes caps the API's answer (default 1 MiB).
	MaxResponseBytes int `yaml:"max_response_bytes" validate:"gte=0,lte=268435456"`
}

// Sandbox is a CLI's sandbox (launch.Sandbox, the one declaration of its
// keys: the network on unless it says network: false, the workspace
// read-only unless workspace_writable, only its own credentials from
// toold's environment, no address-space or CPU-time limit unless set) and
// the directories the CLI is found in.
type Sandbox struct {
	launch.Sandbox `yaml:",inline"`
	// Path lists the directories the CLI (and the node or python it
	// runs on) is found in; default /usr/local/bin:/usr/bin:/bin. It is
	// the CLI's PATH unless env sets one.
	Path []string `yaml:"path" validate:"dive,required"`
}

// Defaults of the settings above.
const (
	DefaultDetection      = 5 * time.Second
	DefaultConsultation   = 90 * time.Second
	DefaultReview         = 600 * time.Second
	DefaultSynthesis      = 120 * time.Second
	DefaultDetectionTTL   = 5 * time.Minute
	DefaultMaxPromptBytes = 64 << 10
	DefaultMaxInFlight    = 4
	// MaxArgPromptBytes is the largest prompt passed as an argument: Linux
	// refuses a single argument over 128 KiB (MAX_ARG_STRLEN).
	MaxArgPromptBytes = 120_000
)

// Enabled reports whether the provider may be used.
func (p ProviderConfig) enabled() bool { return p.Enabled == nil || *p.Enabled }

// withDefaults returns the timeouts with unset ones defaulted.
func (t Timeouts) withDefaults() Timeouts {
	return Timeouts{Detection: cmp.Or(t.Detection, DefaultDetection), Consultation: cmp.Or(t.Consultation, DefaultConsultation),
		Review: cmp.Or(t.Review, DefaultReview), Synthesis: cmp.Or(t.Synthesis, DefaultSynthesis)}
}
