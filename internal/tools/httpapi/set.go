package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/itchyny/gojq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/problems"
	"github.com/toold/toold/internal/tools"
)

// Options wire a Set into toold.
type Options struct {
	// Registerer receives the upstream metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Resolver looks up the APIs' names (default: the system's).
	Resolver *net.Resolver
	// Vault resolves the caller's own credentials a tool names
	// (${user:name}); nil refuses such a tool.
	Vault credentials.Resolver
	// Delegate holds the OAuth connections, token exchanges and
	// passthroughs tools declare (auth.oauth, auth.token_exchange,
	// auth.passthrough); nil refuses such a tool.
	Delegate *delegate.Manager
}

// Set is the HTTP tools of one configuration and the upstream hosts they
// share. Close it at shutdown.
type Set struct {
	cfg   Config
	opts  Options
	tools []tools.Tool
	// mu guards hosts and unlisted, which Client adds to after New.
	mu       sync.Mutex
	hosts    map[string]*host
	unlisted []*Client
	metrics  *metrics
	// now, sleep and jitter are the clock and the dice of retries and
	// rates; tests replace them.
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func() float64
}

// ConfigError lists every problem of an http section, each with where it
// is, relative to the section ("tools[2]", "hosts.api.example.com").
type ConfigError = problems.List

// New validates cfg and builds its tools; every problem is reported (a
// *ConfigError), each naming its tool.
func New(cfg Config, opts Options) (*Set, error) {
	s := &Set{cfg: cfg, opts: opts, hosts: map[string]*host{}, now: time.Now, sleep: sleepCtx, jitter: defaultJitter}
	probs := &ConfigError{Section: "http"}
	names := map[string]bool{}
	for i, tc := range cfg.Tools {
		t, err := s.declare(tc)
		if err == nil && names[tc.Name] {
			err = errors.New("the name is used twice")
		}
		if err != nil {
			probs.Add(fmt.Sprintf("tools[%d]", i), "%s: %v", tc.Name, err)
			continue
		}
		names[tc.Name] = true
		s.tools = append(s.tools, t)
	}
	if len(probs.Problems) > 0 {
		return nil, probs
	}
	s.metrics = newMetrics(opts.Registerer, s)
	return s, nil
}

// CheckHosts refuses a hosts entry that no tool or Client calls (a
// *ConfigError): a rate or breaker set for a host nobody reaches is a
// mistake, likely a misspelt host. Call it once every tool kind that makes
// Clients has made them; New cannot check it, since Client adds hosts
// after it.
func (s *Set) CheckHosts() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	probs := &ConfigError{Section: "http"}
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Hosts)) {
		if s.hosts[name] == nil {
			msg := "no HTTP tool calls this host"
			if len(s.hosts) > 0 {
				msg += " (hosts: " + strings.Join(slices.Sorted(maps.Keys(s.hosts)), ", ") + ")"
			}
			probs.Add("hosts."+name, "%s", msg)
		}
	}
	return probs.Err()
}

// Tools returns the tools in configuration order.
func (s *Set) Tools() []tools.Tool { return slices.Clone(s.tools) }

// Client builds the Client of a declaration that the Set does not list as
// a tool: another kind of tool (a consultation provider) reaches an API
// through it with everything a listed tool has — the SSRF guard, the rates,
// the host's breaker and Retry-After pauses (shared with listed tools
// calling the same host), retries, credential scrubbing and the upstream
// metrics under tc's name. tc is checked as New checks the section's
// tools; the http section's proxy, breaker defaults and hosts apply. Call
// it while wiring.
func (s *Set) Client(tc ToolConfig) (*Client, error) {
	c, _, err := s.newClient(tc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tc.Name, err)
	}
	s.mu.Lock()
	s.unlisted = append(s.unlisted, c)
	s.mu.Unlock()
	return c, nil
}

// Close drops the idle connections of every client.
func (s *Set) Close() error {
	for _, t := range s.tools {
		t.(*tool).http.CloseIdleConnections()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.unlisted {
		c.http.CloseIdleConnections()
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// declare builds one listed tool: its Client and its spec.
func (s *Set) declare(tc ToolConfig) (*tool, error) {
	c, params, err := s.newClient(tc)
	if err != nil {
		return nil, err
	}
	sp, err := spec(tc, params, c.req.method)
	if err != nil {
		return nil, err
	}
	return &tool{spec: sp, Client: c}, nil
}

// newClient builds a declaration's Client, checking everything that can be
// checked before a request: the schema, the URL (its scheme and host
// through the guard), every placeholder naming a parameter, headers, the
// credential, jq. It returns the parameters' schema as well, for a listed
// tool's spec.
func (s *Set) newClient(tc ToolConfig) (*Client, json.RawMessage, error) {
	if !tools.NamePattern.MatchString(tc.Name) {
		return nil, nil, fmt.Errorf("name must match %s", tools.NamePattern)
	}
	sc, err := readSchema(tc.Parameters)
	if err != nil {
		return nil, nil, fmt.Errorf("parameters: %w", err)
	}
	format := cmp.Or(tc.Response.Format, "json")
	req, err := compileRequest(tc.Request, tc.Auth, format)
	if err != nil {
		return nil, nil, err
	}
	if err := sc.check(req); err != nil {
		return nil, nil, err
	}
	guard, err := netguard.New(netguard.Policy{Allow: tc.Allow, AllowHTTP: tc.AllowHTTP, Proxy: s.cfg.Proxy, Resolver: s.opts.Resolver})
	if err != nil {
		return nil, nil, err
	}
	if err := guard.CheckURL(req.url.base); err != nil {
		return nil, nil, fmt.Errorf("request.url: %w", err)
	}
	c := &Client{set: s, name: tc.Name, req: req, format: format, scrub: scrubber(req.cred.secrets),
		maxBytes: cmp.Or(tc.Response.MaxBytes, DefaultMaxBytes), defaults: sc.defaults,
		idempotent: effects(req.method, tc).Idempotent,
		retry: RetryConfig{Attempts: cmp.Or(tc.Retry.Attempts, DefaultAttempts), Base: cmp.Or(tc.Retry.Base, DefaultBase),
			Max: cmp.Or(tc.Retry.Max, DefaultMax), AttemptTimeout: tc.Retry.AttemptTimeout},
		limiter: newLimiter(tc.Rate)}
	if c.retry.Base > c.retry.Max {
		return nil, nil, fmt.Errorf("retry: base %v is above max %v", c.retry.Base, c.retry.Max)
	}
	if c.jq, err = compileJQ(tc.Response.JQ); err != nil {
		return nil, nil, err
	}
	c.http = guard.Client()
	c.http.CheckRedirect = sameHost(guard)
	if err := s.perUser(c, tc, guard); err != nil {
		return nil, nil, err
	}
	c.host = s.hostFor(req.url.base.Host)
	return c, sc.raw, nil
}

// hostFor returns the shared state of an upstream host, made on first use.
func (s *Set) hostFor(name string) *host {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[name]
	if h == nil {
		h = newHost(name, s.cfg.Hosts[name], s.cfg.Breaker)
		s.hosts[name] = h
	}
	return h
}

// sameHost follows a redirect only to the same scheme and host: a
// credential must never follow the request elsewhere, and the host is the
// one thing an HTTP tool's declaration fixes.
func sameHost(g *netguard.Guard) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if from := via[0].URL; req.URL.Host != from.Host || req.URL.Scheme != from.Scheme {
			return &redirectError{to: req.URL.Scheme + "://" + req.URL.Host}
		}
		return g.CheckRedirect(req, via)
	}
}

type redirectError struct{ to string }

func (e *redirectError) Error() string {
	return "the API redirected to " + e.to + ", another host; HTTP tools follow redirects only on their own host"
}

func compileJQ(expr string) (*gojq.Code, error) {
	if expr == "" {
		return nil, nil
	}
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("response.jq: %w", err)
	}
	// No environment ($ENV is empty: gojq reads it only when given a
	// loader), no modules, no input: a jq expression sees the answer only.
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("response.jq: %w", err)
	}
	return code, nil
}
