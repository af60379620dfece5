// Package config loads toold's YAML configuration: ${ENV} expansion in
// values, built-in defaults under the file, unknown keys refused, and every
// problem reported at once as "path: message".
package config

import (
	_ "embed"
	"time"

	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/command"
	"github.com/toold/toold/internal/tools/consult"
	"github.com/toold/toold/internal/tools/httpapi"
	"github.com/toold/toold/internal/tools/upstream"
	"github.com/toold/toold/internal/tracing"
)

// Config is toold's configuration.
type Config struct {
	// Listen is the API's address. Without auth keys it must be loopback.
	Listen string `yaml:"listen" validate:"required,listen_addr"`
	// AdminListen serves /metrics and pprof; empty disables it.
	AdminListen string `yaml:"admin_listen" validate:"omitempty,listen_addr"`
	// Workspace is the directory the file tools are confined to.
	Workspace string `yaml:"workspace" validate:"required"`
	LogLevel  string `yaml:"log_level" validate:"oneof=debug info warn error"`
	// InsecureNoAuth allows a non-loopback listen address without keys.
	InsecureNoAuth bool         `yaml:"insecure_no_auth"`
	Server         ServerConfig `yaml:"server"`
	Auth           AuthConfig   `yaml:"auth"`
	// Categories override the design's per-category default limits.
	Categories map[string]Limits `yaml:"categories" validate:"dive,keys,oneof=direct external_api mcp system_command subtask,endkeys"`
	// Tools adjust built-in tools by name.
	Tools map[string]Tool `yaml:"tools" validate:"dive,keys,tool_name,endkeys"`
	FS    FSConfig        `yaml:"fs"`
	// Commands are the system_command tools: declarative ones and
	// execute_command (see internal/tools/command).
	Commands command.Config `yaml:"commands"`
	// Sanitize is the input and output sanitization policy (see
	// internal/sanitize); the zero value is the safe default.
	Sanitize sanitize.Config `yaml:"sanitize"`
	// MCP is the Model Context Protocol: toold's own MCP server, and the
	// upstream MCP servers it hosts as tools.
	MCP MCPConfig `yaml:"mcp"`
	// HTTP are the external_api tools declared over HTTP APIs, and the
	// upstream hosts they share (see internal/tools/httpapi).
	HTTP httpapi.Config `yaml:"http"`
	// State is the store every replica shares (NATS JetStream): async
	// executions, idempotency keys, the activity stream, the audit log.
	State StateConfig `yaml:"state"`
	// Executions bound async executions and batches.
	Executions ExecutionsConfig `yaml:"executions"`
	// Consult are the AI coding CLIs and model APIs the consultation tools
	// ask (see internal/tools/consult).
	Consult consult.Config `yaml:"consult"`
	// Approvals govern calls that wait for a person's approval (tools with
	// confirmation: human).
	Approvals ApprovalsConfig `yaml:"approvals"`
	// Delegate bounds the delegate tool's nesting of subtasks.
	Delegate DelegateConfig `yaml:"delegate"`
	// Toolsets name subsets of the catalog: toolsets.<name>: {tools:
	// [patterns], description}, served at /mcp/<name> and by ?toolset=
	// (see docs/search.md).
	Toolsets map[string]Toolset `yaml:"toolsets"`
	// Search configures tool search and deferred loading.
	Search SearchConfig `yaml:"search"`
	// Tracing exports OpenTelemetry traces of every call (off by
	// default); the standard OTEL_* variables override it (see
	// internal/tracing).
	Tracing tracing.Config `yaml:"tracing"`
	// Policy is the Cedar policies that decide who may list, call,
	// approve and observe which tool with which arguments (see
	// docs/policy.md); none: the keys' and tokens' tools decide alone.
	Policy policy.Config `yaml:"policy"`
	// Credentials seals each principal's own credentials and OAuth
	// tokens in the state store (see internal/credentials).
	Credentials CredentialsConfig `yaml:"credentials"`
}

// CredentialsConfig keys the per-principal vault: AES-256-GCM, 32 random
// bytes written as base64 (toold credentials keygen prints one), the same
// on every replica.
type CredentialsConfig struct {
	// Key seals every record: ${TOOLD_CREDENTIALS_KEY}.
	Key string `yaml:"key"`
	// PreviousKeys open records sealed before a rotation; toold seals
	// them again with Key at start, after which they may go.
	PreviousKeys []string `yaml:"previous_keys"`
}

// DelegateConfig bounds delegate.
type DelegateConfig struct {
	// MaxDepth is how deep subtasks may nest (default 4).
	MaxDepth int `yaml:"max_depth" validate:"gte=0,lte=32"`
}

// ApprovalsConfig governs human approvals.
type ApprovalsConfig struct {
	// SelfApproval lets a key with the approve role approve its own calls;
	// off, another key must.
	SelfApproval bool `yaml:"self_approval"`
	// WebhookURL receives a Slack-compatible {"text": "..."} once per call
	// that starts waiting for approval (tool, caller, execution, expiry;
	// never the arguments); empty sends none. It is dialled through the
	// outbound guard (internal/netguard): https and public addresses only,
	// unless WebhookAllow and WebhookAllowHTTP say otherwise.
	WebhookURL       string   `yaml:"webhook_url" validate:"omitempty,url"`
	WebhookAllow     []string `yaml:"webhook_allow"`
	WebhookAllowHTTP bool     `yaml:"webhook_allow_http"`
}

// StateConfig configures the NATS JetStream store (see internal/state).
type StateConfig struct {
	// Enabled turns the store on (the default). Off, there are no async
	// executions, idempotency keys, turns, activity stream or audit log.
	Enabled bool `yaml:"enabled"`
	// Dir holds the embedded store; empty means the workspace's own
	// directory under the user's state directory ($XDG_STATE_HOME/toold or
	// ~/.local/state/toold; see state.DefaultDir).
	Dir string `yaml:"dir"`
	// Replica names this process in records, events and audit; empty
	// means the host name and a random suffix.
	Replica string `yaml:"replica" validate:"omitempty,max=64,printascii"`
	// Retention keeps execution records and results.
	Retention time.Duration `yaml:"retention" validate:"gte=0"`
	// IdempotencyTTL keeps Idempotency-Key answers and turn claims.
	IdempotencyTTL time.Duration `yaml:"idempotency_ttl" validate:"gte=0"`
	// MaxStoreBytes bounds the embedded store's disk use; 0 means the
	// events, audit and artifacts limits plus 1 GiB.
	MaxStoreBytes int64        `yaml:"max_store_bytes" validate:"gte=0"`
	NATS          NATSConfig   `yaml:"nats"`
	Events        StreamLimits `yaml:"events"`
	Audit         AuditConfig  `yaml:"audit"`
	// Artifacts keep the whole of results over their tool's budget
	// (server.max_result_bytes, a tool's max_result_bytes).
	Artifacts ArtifactsConfig `yaml:"artifacts"`
}

// ArtifactsConfig bounds the object store of results kept whole.
type ArtifactsConfig struct {
	// Retention keeps each artifact (default 24h).
	Retention time.Duration `yaml:"retention" validate:"gte=0"`
	// MaxBytes bounds them all together (default 256 MiB, or with
	// state.max_store_bytes set a quarter of what the events and audit
	// limits leave of it, if less); past it a result is answered with its
	// head alone, saying so.
	MaxBytes int64 `yaml:"max_bytes" validate:"gte=0"`
}

// NATSConfig points toold at an external NATS cluster, or lets the
// embedded server accept clients.
type NATSConfig struct {
	// URL of the external NATS server or cluster (nats://host:4222,
	// comma-separated seeds); empty embeds a server.
	URL string `yaml:"url"`
	// Credentials is a .creds file; or User and Password; or Token; or
	// NKeySeedFile, a file holding an NKey user seed (SU...). For the
	// embedded server with Listen they are what every client, toold
	// included, must present.
	Credentials  string `yaml:"credentials"`
	User         string `yaml:"user"`
	Password     string `yaml:"password"`
	Token        string `yaml:"token"`
	NKeySeedFile string `yaml:"nkey_seed_file"`
	// TLS secures the connection: for an external NATS the CA of its
	// servers and this replica's client certificate; for the embedded
	// server's listener its certificate, and with ca_file the CA client
	// certificates must be signed by.
	TLS NATSTLS `yaml:"tls"`
	// Listen makes the embedded server accept NATS clients on host:port
	// (other replicas, the nats CLI, toold audit while toold runs). It
	// requires credentials, and TLS on a non-loopback address.
	Listen string `yaml:"listen" validate:"omitempty,listen_addr"`
	// Replicas of each stream in a clustered NATS (1, 3 or 5).
	Replicas int `yaml:"replicas" validate:"gte=0,lte=5"`
}

// NATSTLS names certificate files (PEM).
type NATSTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// StreamLimits bound a stream.
type StreamLimits struct {
	MaxAge   time.Duration `yaml:"max_age" validate:"gte=0"`
	MaxBytes int64         `yaml:"max_bytes" validate:"gte=0"`
}

// AuditConfig configures the audit log.
type AuditConfig struct {
	Enabled  bool          `yaml:"enabled"`
	MaxAge   time.Duration `yaml:"max_age" validate:"gte=0"`
	MaxBytes int64         `yaml:"max_bytes" validate:"gte=0"`
	// RedactArguments hashes the arguments after the output redactor has
	// replaced secrets and personal data, so the hash cannot confirm a
	// guessed secret.
	RedactArguments bool `yaml:"redact_arguments"`
	// SigningKeyFile holds the ed25519 private key the audit log is
	// signed with (PKCS #8 PEM, or 64 hex digits). Else the variable
	// TOOLD_AUDIT_SIGNING_KEY (read, then removed from the environment);
	// else, for the embedded store only, a key toold makes once in
	// state.dir/audit-signing.key. A shared store needs one of the first
	// two, the same on every replica.
	SigningKeyFile string `yaml:"signing_key_file"`
	// TrustedKeys are more public keys whose signatures verify (and the
	// replicas) accept: "ed25519:<hex>" or a file. Keep a rotated-out key
	// here as long as records it signed are kept.
	TrustedKeys []string `yaml:"trusted_keys" validate:"dive,required"`
	// CheckpointInterval is how often the head of the audit chain is
	// published outside the store (log line, metrics, CheckpointFile);
	// default 1m.
	CheckpointInterval time.Duration `yaml:"checkpoint_interval" validate:"gte=0"`
	// CheckpointFile, when set, gets one JSON line per checkpoint.
	CheckpointFile string `yaml:"checkpoint_file"`
}

// ExecutionsConfig bounds async executions and batches.
type ExecutionsConfig struct {
	// Workers run async executions at once on each replica.
	Workers int `yaml:"workers" validate:"gte=0,lte=10000"`
	// Heartbeat renews a running execution's lease; a replica silent for
	// three heartbeats has lost its executions to the others.
	Heartbeat time.Duration `yaml:"heartbeat" validate:"gte=0"`
	// MaxAttempts bounds the runs of an idempotent execution whose
	// replicas keep dying.
	MaxAttempts int `yaml:"max_attempts" validate:"gte=0,lte=100"`
	// BatchMax caps the calls of a batch.
	BatchMax int `yaml:"batch_max" validate:"gte=0,lte=1000"`
	// MaxWait bounds ?wait= and Prefer: wait=.
	MaxWait time.Duration `yaml:"max_wait" validate:"gte=0"`
	// IdempotencyWait is how long a duplicate request waits for the first
	// one's answer before 409; negative refuses at once.
	IdempotencyWait time.Duration `yaml:"idempotency_wait"`
}

// MCPConfig is the mcp section.
type MCPConfig struct {
	// Serve exposes every tool over MCP at /mcp on the API listener
	// (default true); toold -stdio serves them over stdio either way.
	Serve *bool `yaml:"serve"`
	// Servers are upstream MCP servers whose tools toold serves as its own
	// (see internal/tools/upstream).
	Servers []upstream.Config `yaml:"servers" validate:"dive"`
	// StdioKey names the key (auth.keys[].name) whose tools and roles a
	// toold -stdio caller has; -stdio-key overrides it. Required for -stdio
	// when keys are configured: the caller at the other end of stdio is a
	// named principal, never "anonymous".
	StdioKey string `yaml:"stdio_key" validate:"omitempty,printascii,max=64"`
}

// Serves reports whether /mcp is served.
func (m MCPConfig) Serves() bool { return m.Serve == nil || *m.Serve }

// ServerConfig tunes the HTTP server.
type ServerConfig struct {
	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes" validate:"gte=0,lte=1073741824"`
	// MaxResultBytes is the result budget of every tool that declares
	// none (DefaultMaxResultBytes when absent; 0: no budget): a larger
	// result is answered with a head that fits and kept whole as an
	// artifact of the call (state.artifacts).
	MaxResultBytes *int64 `yaml:"max_result_bytes" validate:"omitempty,result_budget"`
	// MaxJSONDepth bounds argument nesting (default 64).
	MaxJSONDepth int `yaml:"max_json_depth" validate:"gte=0,lte=10000"`
	// AllowedOrigins may call toold from a browser (scheme://host[:port]).
	AllowedOrigins []string `yaml:"allowed_origins" validate:"dive,url"`
	// AllowedHosts are accepted Host headers besides loopback names when
	// no keys are configured.
	AllowedHosts []string `yaml:"allowed_hosts" validate:"dive,required"`
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout bound slow clients.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" validate:"gte=0"`
	ReadTimeout       time.Duration `yaml:"read_timeout" validate:"gte=0"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" validate:"gte=0"`
	// WriteTimeout bounds each write of a response to a client that stops
	// reading (default 30s); how long a call, a long poll or a stream lasts
	// is not counted.
	WriteTimeout time.Duration `yaml:"write_timeout" validate:"gte=0"`
	// MaxHeaderBytes caps request headers.
	MaxHeaderBytes int `yaml:"max_header_bytes" validate:"gte=0,lte=16777216"`
	// BodyBudgetBytes caps the bytes of request bodies held in memory at
	// once, over all requests (REST and /mcp); past it a request is refused
	// with 503 and Retry-After. At least max_body_bytes; 0 means four times
	// max_body_bytes.
	BodyBudgetBytes int64 `yaml:"body_budget_bytes" validate:"gte=0"`
	// BodyReadTimeout bounds how long a request body may take to arrive,
	// counted from when toold starts reading it (a large body: once its call
	// is admitted), and never past the call's own timeout; a body still
	// arriving then is refused with 408. 0 means 10s.
	BodyReadTimeout time.Duration `yaml:"body_read_timeout" validate:"gte=0"`
	// MaxConnections caps concurrent connections of the API listener. At
	// the cap an idle keep-alive connection is closed to make room, and
	// when every connection is busy a new one is answered 503 with
	// Retry-After at once. 0 means no cap.
	MaxConnections int `yaml:"max_connections" validate:"gte=0"`
	// GlobalCap bounds the calls accepted (running plus queued) over all
	// tools together; 0 means only the per-tool bulkheads apply.
	GlobalCap int `yaml:"global_cap" validate:"gte=0"`
	// DrainGrace is how long accepted calls may finish after SIGTERM.
	DrainGrace time.Duration `yaml:"drain_grace" validate:"gte=0"`
	// Pprof serves /debug/pprof on the admin listener next to /metrics
	// (default false: profiles show the process's memory and arguments;
	// turn it on where only operators reach the admin port).
	Pprof *bool `yaml:"pprof"`
	// ConfirmSecret signs confirmation tokens. Replicas that share it
	// and a state store accept each other's tokens, each once (the store
	// records its use); empty means a random secret per process (a token
	// then works only on the replica that issued it). Without a store the
	// key is derived afresh in each process, so tokens end at a restart.
	// It also signs the session ids /mcp gives clients it may ask things
	// (derived with a label of its own), so replicas read each other's.
	// Give at least 32 characters, from a secret store:
	// ${TOOLD_CONFIRM_SECRET}.
	ConfirmSecret string `yaml:"confirm_secret" validate:"omitempty,min=32"`
	// PublicURL is where people's browsers reach toold
	// (https://toold.example.com): the OAuth connections' callback
	// (/connections/callback) and consent pages are under it. Empty means
	// the address toold listens on, which must then be loopback.
	PublicURL string `yaml:"public_url" validate:"omitempty,url"`
}

// AuthConfig lists the API keys and the trusted token issuers.
type AuthConfig struct {
	Keys []Key `yaml:"keys" validate:"dive"`
	// OAuth are the issuers whose access tokens toold accepts (one, or a
	// list; see internal/oauth).
	OAuth oauth.Issuers `yaml:"oauth" validate:"dive"`
	// Limits bound each principal (a key's holder, a token's subject) on
	// its own: a rate of calls and a share of each tool's bulkhead.
	Limits limits.PrincipalConfig `yaml:"limits"`
}

// Key is an API key, stored as its SHA-256 (toold -hash-key prints one).
type Key struct {
	Name   string   `yaml:"name" validate:"required,printascii,max=64"`
	SHA256 string   `yaml:"sha256" validate:"required,len=64,hexadecimal"`
	Tools  []string `yaml:"tools" validate:"min=1,dive,required"`
	// Toolsets bind the key to toolsets: of the tools Tools allows, it
	// may use only those of these toolsets (tools: ["*"] for all of them).
	Toolsets []string `yaml:"toolsets" validate:"dive,required"`
	// Roles the key holds (auth.Roles: call, observe, admin, approve);
	// none means call.
	Roles []string `yaml:"roles" validate:"dive,role"`
}

// Limits override a category's or a tool's limits; zero fields inherit,
// and max_queue: 0 means no queue.
type Limits = tools.LimitsConfig

// Tool adjusts one tool.
type Tool struct {
	// Enabled turns a tool on or off; nil keeps the tool's default.
	Enabled     *bool  `yaml:"enabled"`
	Description string `yaml:"description"`
	Limits      Limits `yaml:"limits"`
	// Fallback names tools that answer, in order, with the same arguments
	// when this one fails in a way another tool may get past (timeout,
	// overload, an unavailable upstream, a system error); it replaces
	// fallbacks the tool declares itself.
	Fallback []string `yaml:"fallback" validate:"omitempty,dive,tool_name"`
	// Confirmation replaces the tool's own: none, token (the host asks its
	// user and repeats the call with a token) or human (the call waits for
	// an approver, POST /approvals/{id}).
	Confirmation string `yaml:"confirmation" validate:"omitempty,oneof=none token human"`
	// TracePayloads puts the call's arguments and result, as sanitized,
	// on its span (gen_ai.tool.call.arguments and .result). Off, spans
	// never carry them.
	TracePayloads bool `yaml:"trace_payloads"`
	// MaxResultBytes replaces the tool's result budget (0: none).
	MaxResultBytes *int64 `yaml:"max_result_bytes" validate:"omitempty,result_budget"`
}

// FSConfig bounds the file tools; zero fields take the tools' defaults.
type FSConfig struct {
	MaxReadBytes      int   `yaml:"max_read_bytes" validate:"gte=0"`
	MaxTotalReadBytes int   `yaml:"max_total_read_bytes" validate:"gte=0"`
	MaxFileBytes      int64 `yaml:"max_file_bytes" validate:"gte=0"`
	MaxEntries        int   `yaml:"max_entries" validate:"gte=0"`
	MaxMatches        int   `yaml:"max_matches" validate:"gte=0"`
	MaxWriteBytes     int   `yaml:"max_write_bytes" validate:"gte=0"`
	// AllowProtected lets write_file and edit_file change the files other
	// tools execute (.git, and every command tool's executes); each call
	// of the two then needs confirmation. Off: those writes are refused.
	AllowProtected bool `yaml:"allow_protected"`
}

// Enabled reports whether the named tool is on, given its default.
func (c *Config) Enabled(tool string, byDefault bool) bool {
	if t, ok := c.Tools[tool]; ok && t.Enabled != nil {
		return *t.Enabled
	}
	return byDefault
}

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML is the built-in configuration, as YAML.
func DefaultYAML() []byte { return defaultYAML }

// Default returns the built-in configuration.
func Default() *Config {
	c, err := parse(defaultYAML, func(string) (string, bool) { return "", false }, &Config{})
	if err != nil {
		panic("config: the embedded default is invalid: " + err.Error())
	}
	return c
}
