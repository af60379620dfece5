package upstream

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"time"

	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/tools"
)

// Config declares one upstream MCP server (an element of mcp.servers).
// Exactly one of Command (stdio) and URL (Streamable HTTP) is set.
type Config struct {
	// Name prefixes its tools: the upstream tool "echo" of the server
	// "everything" is served as "everything.echo".
	Name string `yaml:"name" validate:"required"`

	// Command and Args start the server as a process speaking on its
	// standard streams, in its Sandbox (launch.Sandbox: containment,
	// network, workspace_writable, read_only_paths, rlimits). Cwd is
	// relative to the workspace. Env sets fixed variables and EnvAllow
	// names variables passed on from toold's environment; nothing else is
	// inherited.
	Command  string            `yaml:"command"`
	Args     []string          `yaml:"args"`
	Cwd      string            `yaml:"cwd"`
	Env      map[string]string `yaml:"env" validate:"dive,keys,required,excludesall==,endkeys"`
	EnvAllow []string          `yaml:"env_allow" validate:"dive,required,excludesall=="`
	Sandbox  launch.Sandbox    `yaml:"sandbox"`

	// URL reaches the server over Streamable HTTP; Headers are sent with
	// every request (credentials as ${ENV}: never logged). Every connection
	// dials through toold's outbound guard (internal/netguard): the public
	// internet over https only, unless Allow names the internal hosts,
	// addresses or CIDR prefixes the server is on and AllowHTTP permits a
	// plain http:// URL.
	URL       string            `yaml:"url"`
	Headers   map[string]string `yaml:"headers" validate:"dive,keys,required,endkeys"`
	Allow     []string          `yaml:"allow" validate:"dive,required"`
	AllowHTTP bool              `yaml:"allow_http"`
	// Auth makes each caller's calls reach the server as them: an OAuth
	// connection of theirs (oauth; the server's authorization server is
	// discovered, RFC 9728), their own token exchanged (token_exchange) or
	// passed on where it was issued for the server (passthrough). A header
	// may name the caller's own credential too: ${user:name}. Such a
	// server has a session per caller; its tools are listed with a
	// connected caller's.
	Auth AuthConfig `yaml:"auth"`

	// Tools selects which upstream tools are served (by upstream name).
	Tools Filter `yaml:"tools"`
	// Limits are the defaults of the server's tools (category mcp: 1s
	// target, 3s max, 10s timeout); ToolLimits override them per upstream
	// tool name.
	Limits     tools.LimitsConfig            `yaml:"limits"`
	ToolLimits map[string]tools.LimitsConfig `yaml:"tool_limits"`
	// MaxResultBytes is the result budget of each of the server's tools
	// (absent: toold's, server.max_result_bytes; 0: none): a larger
	// result is answered with a head that fits and kept whole as an
	// artifact of the call.
	MaxResultBytes *int64 `yaml:"max_result_bytes" validate:"omitempty,result_budget"`
	// MaxInFlight caps the calls running on this server over all its
	// tools, on top of each tool's own bulkhead (default 16). The
	// pipeline's limiter enforces it (ServerCaps).
	MaxInFlight int `yaml:"max_in_flight" validate:"gte=0,lte=10000"`
	// ConnectTimeout bounds initialize plus tools/list (default 10s).
	ConnectTimeout time.Duration `yaml:"connect_timeout" validate:"gte=0"`
	// MaxMessageBytes bounds one message from the server (default 4 MiB);
	// a larger one ends the connection, which is then re-established.
	MaxMessageBytes int `yaml:"max_message_bytes" validate:"gte=0,lte=268435456"`
	// Confirm lists upstream tool names (path.Match patterns) that need
	// the caller's confirmation (a token) before each call.
	Confirm []string `yaml:"confirm" validate:"dive,required"`
	// ConfirmDestructive is how the tools the server marks destructive
	// (not read-only, destructiveHint not false) are confirmed: human (the
	// default: each call waits for an approver), token, or none.
	ConfirmDestructive string `yaml:"confirm_destructive" validate:"omitempty,oneof=none token human"`
	// Required makes /readyz fail while the server is not connected.
	Required bool `yaml:"required"`
	// Pin pins each tool's definition the first time toold sees it
	// (default true): a later listing with a different definition holds
	// the tool back until an admin accepts it (GET /tools/changes).
	Pin *bool `yaml:"pin"`
	// PinNew is what becomes of a tool the server adds once its tools are
	// pinned: accept (the default) pins it as it comes, review holds it
	// back as a changed one.
	PinNew string `yaml:"pin_new" validate:"omitempty,oneof=review accept"`
}

// AuthConfig is a server's auth section: one of its keys.
type AuthConfig struct {
	OAuth         *delegate.OAuthConfig    `yaml:"oauth"`
	TokenExchange *delegate.ExchangeConfig `yaml:"token_exchange"`
	Passthrough   bool                     `yaml:"passthrough"`
}

// delegated reports an auth section that is set.
func (a AuthConfig) delegated() bool {
	return a.OAuth != nil || a.TokenExchange != nil || a.Passthrough
}

// userHeaders are the headers that name the caller's own credentials.
func (c Config) userHeaders() (map[string]credentials.Template, error) {
	out := map[string]credentials.Template{}
	for k, v := range c.Headers {
		t, err := credentials.ParseTemplate(v)
		if err != nil {
			return nil, fmt.Errorf("headers.%s: %w", k, err)
		}
		if t.PerUser() {
			out[k] = t
		}
	}
	return out, nil
}

// PerUser reports a server whose requests carry each caller's own
// credential.
func (c Config) PerUser() bool {
	h, _ := c.userHeaders()
	return c.Auth.delegated() || len(h) > 0
}

// Filter selects tools by upstream name: those matching an Allow pattern
// (all when Allow is empty) and no Deny pattern.
type Filter struct {
	Allow []string `yaml:"allow" validate:"dive,required"`
	Deny  []string `yaml:"deny" validate:"dive,required"`
}

// Allows reports whether the upstream tool name passes the filter.
func (f Filter) Allows(name string) bool {
	return (len(f.Allow) == 0 || matchAny(f.Allow, name)) && !matchAny(f.Deny, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Defaults of a server, documented on Config.
const (
	DefaultMaxInFlight     = 16
	DefaultConnectTimeout  = 10 * time.Second
	DefaultMaxMessageBytes = 4 << 20
)

// ServerCaps are the servers' max_in_flight (the default where unset) by
// name, for the limiter (limits.Options.ServerCaps): a server's tools have
// its name as their Spec.Source, so their calls are counted together.
func ServerCaps(cfgs []Config) map[string]int {
	caps := map[string]int{}
	for _, c := range cfgs {
		caps[c.Name] = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	}
	return caps
}

var serverName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// Check reports what is wrong with a server's declaration, naming fields
// as the config file does.
func (c Config) Check() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !serverName.MatchString(c.Name) {
		fail("name: %q must be 1-32 letters, digits, '_' or '-' (it prefixes tool names, joined by a dot)", c.Name)
	}
	switch {
	case c.Command == "" && c.URL == "":
		fail("command or url: a server is started as a process (command) or reached over HTTP (url)")
	case c.Command != "" && c.URL != "":
		fail("command and url: give one of them, not both")
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			fail("url: %q is not an http(s) URL", c.URL)
		}
		if len(c.Args) > 0 || c.Cwd != "" || len(c.Env) > 0 || len(c.EnvAllow) > 0 {
			fail("args, cwd, env, env_allow: only for a server started with command")
		}
		if _, err := c.guard(); err != nil {
			fail("url: %v", err)
		}
	case len(c.Headers) > 0 || len(c.Allow) > 0 || c.AllowHTTP || c.Auth.delegated():
		fail("headers, allow, allow_http, auth: only for a server reached by url")
	}
	if _, err := c.userHeaders(); err != nil {
		fail("%v", err)
	}
	n := 0
	for _, on := range []bool{c.Auth.OAuth != nil, c.Auth.TokenExchange != nil, c.Auth.Passthrough} {
		if on {
			n++
		}
	}
	if n > 1 {
		fail("auth: give one of oauth, token_exchange and passthrough")
	}
	if c.Auth.OAuth != nil {
		if err := c.Auth.OAuth.Check(true); err != nil {
			fail("auth.oauth: %v", err)
		}
	}
	if c.Auth.TokenExchange != nil {
		if err := c.Auth.TokenExchange.Check(); err != nil {
			fail("auth.token_exchange: %v", err)
		}
	}
	c.checkSandbox(fail)
	if c.PinNew != "" && c.PinNew != PinNewAccept && c.PinNew != PinNewReview {
		fail("pin_new: %q is not review or accept", c.PinNew)
	}
	if c.PinNew != "" && !c.pinned() {
		fail("pin_new: the server is not pinned (pin: false)")
	}
	for _, pats := range [][]string{c.Tools.Allow, c.Tools.Deny, c.Confirm} {
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil {
				fail("pattern %q is malformed", p)
			}
		}
	}
	// Limits and ToolLimits are checked with the configuration's
	// categories.mcp, which the registry resolves them over.
	return errors.Join(errs...)
}

// guard is the outbound guard of a server reached by url, with the URL
// checked against it now: a refusal that needs no DNS answer is a
// configuration error, not a reconnection loop.
func (c Config) guard() (*netguard.Guard, error) {
	g, err := netguard.New(netguard.Policy{Allow: c.Allow, AllowHTTP: c.AllowHTTP})
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, err
	}
	if err := g.CheckURL(u); err != nil {
		return nil, fmt.Errorf("%w (name the host in allow, and set allow_http for http://)", err)
	}
	return g, nil
}

// checkSandbox refuses the sandbox keys a server does not take: its
// environment is declared on the server, and its stdout is its protocol
// (max_message_bytes bounds a message).
func (c Config) checkSandbox(fail func(string, ...any)) {
	sb := c.Sandbox
	if len(sb.Env) > 0 || len(sb.EnvAllow) > 0 {
		fail("sandbox.env, sandbox.env_allow: a server's environment is set on the server itself (env, env_allow), not in its sandbox")
	}
	if sb.MaxOutputBytes != 0 {
		fail("sandbox.max_output_bytes: a server's stdout is its protocol and is not capped; max_message_bytes bounds one message")
	}
	if err := sb.Check(); err != nil {
		fail("sandbox.%v", err)
	}
	if p := sb.Network.AllowList(); p != nil && p.UsesCredentials() {
		fail("sandbox.network.inject: a server serves every caller, so ${user:NAME}, one caller's own credential, cannot be injected for it; give the value from toold's environment (${VAR})")
	}
}

// processSpec is the sandboxed process of a stdio server (as every
// launch.ProcessSpec, without a CPU-time or address-space limit unless
// set), with the server's environment.
func (c Config) processSpec() launch.ProcessSpec {
	sb := c.Sandbox
	sb.EnvAllow, sb.Env = c.EnvAllow, c.Env
	return launch.ProcessSpec{Argv: append([]string{c.Command}, c.Args...), Dir: c.Cwd, Sandbox: sb, Name: c.Name}
}
