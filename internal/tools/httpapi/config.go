package httpapi

import (
	"time"

	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/tools"
)

// Config is the `http:` section of toold's configuration: the HTTP API
// tools and the settings of the upstream hosts they call. The zero value
// serves no tool.
type Config struct {
	// Proxy is an http(s) proxy every HTTP tool's requests go through;
	// empty means none. Proxy environment variables are never read.
	Proxy string `yaml:"proxy" validate:"omitempty,url"`
	// Breaker is the default circuit breaker of every upstream host.
	Breaker BreakerConfig `yaml:"breaker"`
	// Hosts tune single upstream hosts, by host or host:port as the tools'
	// URLs write them: a rate shared by every tool calling the host, and
	// its breaker. Clients made with Set.Client count as calling theirs; an
	// entry no tool calls is refused by Set.CheckHosts.
	Hosts map[string]HostConfig `yaml:"hosts" validate:"dive,keys,required,endkeys"`
	// Tools are the declared HTTP API tools.
	Tools []ToolConfig `yaml:"tools" validate:"dive"`
}

// HostConfig tunes one upstream host.
type HostConfig struct {
	Rate    RateConfig    `yaml:"rate"`
	Breaker BreakerConfig `yaml:"breaker"`
}

// BreakerConfig is a circuit breaker: after Failures consecutive failed
// attempts (connection errors, 5xx answers, attempts timing out) the host's
// breaker opens and calls are refused at once, with a retry hint, for
// OpenFor; then Probes calls are let through, and as many successes close
// it again (one failure opens it anew). Zero fields inherit.
type BreakerConfig struct {
	Failures int           `yaml:"failures" validate:"gte=0,lte=10000"`
	OpenFor  time.Duration `yaml:"open_for" validate:"gte=0"`
	Probes   int           `yaml:"probes" validate:"gte=0,lte=1000"`
}

// RateConfig is a token bucket: PerSecond requests on average, Burst at
// once. A call that finds the bucket empty waits for a token when that
// fits its deadline, and is refused with a retry hint otherwise. Zero
// PerSecond is no limit.
type RateConfig struct {
	PerSecond float64 `yaml:"per_second" validate:"gte=0"`
	// Burst defaults to PerSecond rounded up (at least 1).
	Burst int `yaml:"burst" validate:"gte=0,lte=1000000"`
}

// ToolConfig declares one HTTP API tool.
type ToolConfig struct {
	// Name must match ^[a-zA-Z0-9_.-]{1,64}$ and be unique.
	Name        string `yaml:"name" validate:"required"`
	Title       string `yaml:"title"`
	Description string `yaml:"description" validate:"required"`
	// Instructions tell the model when and why to use the tool.
	Instructions string `yaml:"instructions"`
	// Parameters is the JSON Schema of the arguments, written as YAML. A
	// top-level "default" is applied before the request is built.
	Parameters map[string]any        `yaml:"parameters"`
	Examples   []tools.ExampleConfig `yaml:"examples" validate:"dive"`
	Request    RequestConfig         `yaml:"request"`
	// Auth is the credential sent with every request; its values are
	// never logged, never shown, and scrubbed from what the API answers.
	Auth     AuthConfig     `yaml:"auth"`
	Response ResponseConfig `yaml:"response"`
	Retry    RetryConfig    `yaml:"retry"`
	// Rate limits this tool's requests (the host's rate applies as well).
	Rate RateConfig `yaml:"rate"`
	// Allow lists internal hosts, addresses or CIDR prefixes the tool may
	// reach (see internal/netguard); the public internet needs no entry.
	Allow []string `yaml:"allow" validate:"dive,required"`
	// AllowHTTP permits a plain http:// URL; https is required otherwise.
	AllowHTTP bool `yaml:"allow_http"`
	// Fallback names tools that answer, in order, when this one fails in a
	// way another tool may get past.
	Fallback []string `yaml:"fallback" validate:"dive,required"`
	// ReadOnly, Idempotent and Destructive override what the method says
	// (GET and HEAD read, PUT and DELETE are idempotent, DELETE and PUT
	// may destroy). Retries happen only for idempotent tools: declaring a
	// POST search idempotent lets it be retried.
	ReadOnly    *bool `yaml:"read_only"`
	Idempotent  *bool `yaml:"idempotent"`
	Destructive *bool `yaml:"destructive"`
	// RequiresConfirmation makes every call wait for the caller's
	// confirmation.
	RequiresConfirmation bool `yaml:"requires_confirmation"`
	// Limits override the external_api category's (timeout 10s, target
	// 2s, max 3s, 10 in flight, 100 queued).
	Limits tools.LimitsConfig `yaml:"limits"`
	// MaxResultBytes is the tool's result budget (absent: the server's,
	// server.max_result_bytes; 0: none): a larger answer is returned as a
	// head that fits and kept whole as an artifact of the call.
	MaxResultBytes *int64 `yaml:"max_result_bytes" validate:"omitempty,result_budget"`
}

// RequestConfig is what a call sends. Placeholders {name} take the
// argument of that name: in the path (escaped as one segment; {+name}
// keeps slashes between segments), in query and header values, and in
// body strings. A body string that is exactly one placeholder takes the
// argument's JSON value, type and all. A query value or header whose
// placeholder has no argument (and no default) is left out.
type RequestConfig struct {
	// Method is GET (default), HEAD, POST, PUT, PATCH or DELETE.
	Method string `yaml:"method" validate:"omitempty,oneof=GET HEAD POST PUT PATCH DELETE"`
	// URL is scheme://host[:port]/path: the scheme and host are literal,
	// so no argument can change where the request goes.
	URL     string            `yaml:"url" validate:"required"`
	Query   map[string]string `yaml:"query"`
	Headers map[string]string `yaml:"headers"`
	// Body is sent as JSON (POST, PUT, PATCH, DELETE).
	Body any `yaml:"body"`
}

// AuthConfig is one credential, usually from the environment:
// bearer: ${GITHUB_TOKEN}. An empty value (${VAR:-}) sends none. A value
// may name the caller's own credential instead, ${user:github}, resolved
// from their vault at the moment of the request (internal/credentials);
// or the credential is an OAuth connection of the caller's (oauth), the
// caller's token exchanged for the API's (token_exchange), or the
// caller's token itself where it was issued for this API (passthrough).
type AuthConfig struct {
	// OAuth makes toold an OAuth client of the API's authorization server
	// (issuer), each caller authorizing for themselves (per_user).
	OAuth *delegate.OAuthConfig `yaml:"oauth"`
	// TokenExchange trades the caller's own access token (RFC 8693).
	TokenExchange *delegate.ExchangeConfig `yaml:"token_exchange"`
	// Passthrough forwards the caller's own access token, only when its
	// aud names the API.
	Passthrough bool `yaml:"passthrough"`
	// Bearer is sent as Authorization: Bearer <token>.
	Bearer string `yaml:"bearer"`
	// Header is sent as a header of that name.
	Header *NamedSecret `yaml:"header"`
	// Query is sent as a query parameter of that name.
	Query *NamedSecret `yaml:"query"`
	// Basic is sent as Authorization: Basic.
	Basic *BasicAuth `yaml:"basic"`
}

// NamedSecret is a credential sent under a name.
type NamedSecret struct {
	Name  string `yaml:"name" validate:"required"`
	Value string `yaml:"value"`
}

// BasicAuth is HTTP basic authentication.
type BasicAuth struct {
	Username string `yaml:"username" validate:"required"`
	Password string `yaml:"password"`
}

// ResponseConfig shapes what the API answers into the tool's result.
type ResponseConfig struct {
	// Format is json (default: the body must be one JSON value, or the
	// call fails with invalid_output) or text.
	Format string `yaml:"format" validate:"omitempty,oneof=json text"`
	// MaxBytes caps the body read (default 1 MiB); a longer answer fails.
	MaxBytes int `yaml:"max_bytes" validate:"gte=0,lte=268435456"`
	// JQ shapes the result (github.com/itchyny/gojq): one output is the
	// result, several are an array, none is null.
	JQ string `yaml:"jq"`
	// Output is the JSON Schema of the result (after jq); every result is
	// checked against it.
	Output map[string]any `yaml:"output"`
}

// RetryConfig bounds retries of idempotent calls (and of any call whose
// connection failed before a byte was sent): connection errors, 408, 429,
// 502, 503 and 504, with exponential backoff and full jitter, or the
// API's Retry-After when it fits the deadline. Every attempt and wait is
// inside the call's one deadline.
type RetryConfig struct {
	// Attempts is the most requests per call, the first included
	// (default 3; 1 turns retries off).
	Attempts int `yaml:"attempts" validate:"gte=0,lte=10"`
	// Base is the first backoff's bound (default 100ms); each retry doubles
	// it, up to Max (default 2s).
	Base time.Duration `yaml:"base" validate:"gte=0"`
	Max  time.Duration `yaml:"max" validate:"gte=0"`
	// AttemptTimeout bounds one attempt (default: the call's deadline),
	// leaving time to retry a hung one.
	AttemptTimeout time.Duration `yaml:"attempt_timeout" validate:"gte=0"`
}

// Defaults of the settings above.
const (
	DefaultMaxBytes       = 1 << 20
	DefaultAttempts       = 3
	DefaultBase           = 100 * time.Millisecond
	DefaultMax            = 2 * time.Second
	DefaultFailures       = 5
	DefaultOpenFor        = 30 * time.Second
	DefaultProbes         = 1
	defaultUserAgent      = "toold"
	maxHeaderValueBytes   = 8 << 10
	maxHeaderBytes        = 32 << 10
	maxReportedRetryAfter = time.Hour
)
