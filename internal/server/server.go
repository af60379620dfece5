// Package server is toold's HTTP surface: the chi router, its middleware
// (request id, access log, origin and host checks, authentication), the
// handlers, and the one table from outcomes to HTTP statuses. Handlers build
// envelopes; only writeEnvelope writes them.
package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/console"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/metrics"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/pins"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/state"
)

// DefaultMaxBodyBytes caps a request body when none is configured.
const DefaultMaxBodyBytes = 1 << 20

// Options configure a Server.
type Options struct {
	Dispatcher *dispatch.Dispatcher
	// Keyring authenticates callers; nil or empty means no authentication
	// (toold then serves loopback only, see cmd/toold).
	Keyring *auth.Keyring
	// OAuth verifies the bearer tokens of trusted issuers; nil accepts
	// none.
	OAuth *oauth.Verifier
	// AnonymousWithheld, when set and without keys or issuers, is asked
	// before a caller is taken as auth.Anonymous: a reason ("" for none)
	// refuses the request as unauthenticated instead. cmd/toold says why
	// when a program it starts could reach its API (launch.Exposed): that
	// program would otherwise be the anonymous caller, holding every tool.
	AnonymousWithheld func() string
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call toold; a request carrying any other Origin is refused.
	AllowedOrigins []string
	// AllowedHosts are extra Host header values accepted when no keys are
	// configured; loopback names are always accepted.
	AllowedHosts []string
	// Bodies reads request bodies under the byte budget they share with
	// /mcp, and their read deadline; nil makes a reader of its own, from
	// MaxBodyBytes and the package's defaults.
	Bodies       *reqbody.Reader
	MaxBodyBytes int64
	// WriteTimeout bounds each write of a response: a client that stops
	// reading is cut off once one write has waited this long. The time a
	// call takes before it answers is not counted, so long calls, long
	// polls (?wait=) and streams (SSE, MCP) are never cut for lasting.
	// 0 sets no bound. (http.Server's own WriteTimeout bounds the whole
	// response instead, and would cut every stream at a fixed age.)
	WriteTimeout time.Duration
	Logger       *zap.Logger
	// OpenAPI is served at /openapi.yaml.
	OpenAPI []byte
	// Registerer receives HTTP metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Ready, when set, is asked by /readyz: an error (a required upstream
	// not connected) makes the replica not ready, with the error's text.
	Ready func() error
	// StuckCalls, when set, counts by tool the calls that outlived their
	// cancelled context; /readyz lists them under "stuck" (the replica
	// stays ready: it still serves, but an operator should look).
	StuckCalls func() map[string]int
	// Measured, when set, is each tool's latency as this replica measured
	// it (metrics.Tools.Measured), served at GET /latency beside the
	// documented targets.
	Measured func(e *registry.Entry) (metrics.Measured, bool)
	// MCP, when set, serves the Model Context Protocol at /mcp behind the
	// same origin, host and key checks as the REST routes.
	MCP http.Handler
	// Executions serves async executions, batches, idempotency keys and
	// turns; nil builds one without a store (synchronous batches only).
	Executions *executions.Service
	// Store, when set, serves the activity stream and the audit log, and
	// readiness fails while it is unreachable.
	Store *state.Store
	// Recorder audits administrative actions; nil audits none.
	Recorder *events.Recorder
	// SelfApproval lets a key with the approve role decide on its own
	// calls and, without keys, the anonymous caller decide at all
	// (approvals.self_approval; off by default).
	SelfApproval bool
	// Tracer, when set, gives every request a server span, parent of its
	// calls' spans; nil is tracing off.
	Tracer trace.Tracer
	// Toolsets are the configured toolsets (?toolset=, /mcp/<toolset>).
	Toolsets registry.Toolsets
	// MCPToolsets serve /mcp/<toolset>, by toolset name.
	MCPToolsets map[string]http.Handler
	// Pinned are the patterns of the tools a deferred listing
	// (?format=anthropic&defer_loading=true) lists in full (search.pinned;
	// a toolset adds its own).
	Pinned []string
	// Pins, when set, serves the changes of hosted tools that wait for
	// an admin (GET /tools/changes, POST /tools/changes/{name}).
	Pins *pins.Keeper
	// Relist, when set, has the hosted server of a tool list its tools
	// again and returns once this replica serves the list (or ctx ends):
	// a decided change is answered when it is served here.
	Relist func(ctx context.Context, tool string) error
	// Credentials is each caller's vault (PUT /credentials/{name}); nil
	// keeps none.
	Credentials *credentials.Vault
	// Delegate holds the OAuth connections callers make (/connections);
	// nil has none.
	Delegate *delegate.Manager
	// Version is toold's version, in GET /'s index (and the docs it
	// links are that release's).
	Version string
	// Reload, when set, serves POST /admin/reload (the admin role): it
	// reads the configuration file again and applies it, or refuses it
	// with the error the caller gets.
	Reload ReloadFunc
}

// Server serves the API; build it with New, serve Handler.
type Server struct {
	opts    Options
	log     *zap.Logger
	router  chi.Router
	metrics *httpMetrics
	// mu guards the drain state: executions in progress, and whether new
	// ones are refused.
	mu       sync.Mutex
	draining bool
	active   int
	idle     chan struct{} // closed once draining with nothing active
	quit     chan struct{} // closed by Drain: streams end
	origins  map[string]bool
	hosts    map[string]bool
	// mcpActive counts /mcp requests being served (see WaitMCP).
	mcpActive atomic.Int64
	bodies    *reqbody.Reader
	listings  listings
}

// New builds a server.
func New(opts Options) (*Server, error) {
	if opts.Dispatcher == nil {
		return nil, errors.New("server: a dispatcher is required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Executions == nil {
		var err error
		if opts.Executions, err = executions.New(executions.Options{Dispatcher: opts.Dispatcher, Logger: opts.Logger}); err != nil {
			return nil, err
		}
	}
	if opts.Bodies == nil {
		opts.Bodies = reqbody.New(reqbody.Options{MaxBytes: opts.MaxBodyBytes, Registerer: opts.Registerer})
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: newHTTPMetrics(opts.Registerer), bodies: opts.Bodies,
		origins: set(opts.AllowedOrigins), hosts: set(opts.AllowedHosts), idle: make(chan struct{}), quit: make(chan struct{})}
	s.router = s.routes()
	s.metrics.ready.Set(1)
	return s, nil
}

func set(list []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range list {
		m[strings.ToLower(strings.TrimRight(v, "/"))] = true
	}
	return m
}

// Handler is the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.router }

// Drain turns readiness off and refuses new executions with 503 draining;
// calls already accepted carry on. The server keeps serving meanwhile, so
// probes see the 503 and late callers get an envelope telling them to go
// elsewhere; Idle says when the accepted calls are done.
func (s *Server) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	s.draining = true
	close(s.quit)
	s.metrics.ready.Set(0)
	if s.active == 0 {
		close(s.idle)
	}
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Idle is closed once the server is draining and no accepted execution is
// still in progress.
func (s *Server) Idle() <-chan struct{} { return s.idle }

// admit counts an execution in, unless the server is draining.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.active++
	return true
}

func (s *Server) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.draining && s.active == 0 {
		close(s.idle)
	}
}

// routes builds the router. Every route needs credentials (when keys or
// token issuers are configured) unless publicRoutes mounts it: the REST
// routes sit in a group behind authenticate, /mcp in one behind its
// JSON-RPC twin, so a route added to either cannot forget the check, and
// TestEveryRouteNeedsCredentials walks the router to hold it so (the
// public routes are listed there one by one). A new route goes in
// apiRoutes, with the role it needs; docs/development.md says more.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.frame)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	r.Group(s.apiRoutes)
	if s.opts.MCP != nil {
		r.Group(s.mcpRoutes)
	}
	// After the groups: /mcp takes every method, and its CORS preflight,
	// which carries no credentials, is public like every preflight.
	s.publicRoutes(r)
	return r
}

// apiRoutes are the REST routes, authenticated: the origin and Host
// checks, then the caller's credentials (authenticate). s.role adds the
// role a route needs; without it any authenticated caller is served.
func (s *Server) apiRoutes(r chi.Router) {
	r.Use(s.authenticate)
	r.Get("/tools", s.listTools)
	r.Get("/tools/search", s.searchTools)
	// Tool integrity (changes.go): an admin's, before /tools/{name}.
	r.Get("/tools/changes", s.role(auth.RoleAdmin, s.listChanges))
	r.Post("/tools/changes/{name}", s.role(auth.RoleAdmin, s.decideChange))
	r.Get("/tools/{name}", s.getTool)
	r.Get("/tools/{name}/schema", s.getSchema)
	r.Get("/latency", s.latency)
	r.Post("/tools/{name}/execute", s.role(auth.RoleCall, s.execute))
	r.Post("/executions", s.role(auth.RoleCall, s.submitExecution))
	r.Get("/executions", s.role(auth.RoleCall, s.listExecutions))
	r.Get("/executions/{id}", s.role(auth.RoleCall, s.getExecution))
	r.Delete("/executions/{id}", s.role(auth.RoleCall, s.cancelExecution))
	r.Get("/executions/{id}/events", s.role(auth.RoleCall, s.executionEvents))
	r.Post("/executions/{id}/resume", s.role(auth.RoleCall, s.resumeExecution))
	r.Get("/approvals", s.role(auth.RoleApprove, s.listApprovals))
	r.Post("/approvals/{id}", s.role(auth.RoleApprove, s.decideApproval))
	r.Post("/batch", s.role(auth.RoleCall, s.batch))
	r.Get("/artifacts/{id}", s.role(auth.RoleCall, s.getArtifact))
	r.Get("/events", s.role(auth.RoleObserve, s.activity))
	r.Get("/audit", s.role(auth.RoleAdmin, s.audit))
	s.credentialRoutes(r)
	r.Post("/admin/reload", s.role(auth.RoleAdmin, s.reload))
}

// mcpRoutes serve the Model Context Protocol, authenticated as the REST
// routes are (mcpGuard), with refusals written as JSON-RPC errors.
func (s *Server) mcpRoutes(r chi.Router) {
	r.Use(s.mcpGuard)
	r.Handle("/mcp", s.opts.MCP)
	r.Handle("/mcp/{toolset}", http.HandlerFunc(s.toolsetMCP))
}

// publicRoutes are the routes that answer without credentials, each for
// a reason: probes (an orchestrator has no key), the contract, the
// console's static page (its scripts call the API with the user's key or
// session), CORS preflights (a browser sends them without credentials),
// and the sign-in: the protected resource metadata (RFC 9728, how a
// client learns where to get a token) and the console's sign-in legs.
// Each is listed in TestEveryRouteNeedsCredentials; adding one here fails
// it until it is listed there too, with its reason.
func (s *Server) publicRoutes(r chi.Router) {
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/openapi.yaml", s.openapi)
	// GET / sends a browser to the console and tells an API client where
	// the routes and docs are (index.go): nothing a caller's key unlocks.
	r.Get("/", s.originOnly(s.indexHandler()))
	// GET /auth/session says whether the request is signed in, and where
	// to sign in: it reads the session itself (sso.go).
	r.Get("/auth/session", s.originOnly(s.session))
	if s.opts.OAuth != nil {
		r.Get(oauth.MetadataPath, s.resourceMetadata)
		r.Get(oauth.MetadataPath+"/*", s.resourceMetadata)
		s.ssoRoutes(r)
	}
	for _, p := range []string{"/tools", "/tools/*", "/executions", "/executions/*", "/batch", "/artifacts/*", "/approvals", "/approvals/*",
		"/events", "/audit", "/connections", "/connections/*", "/credentials", "/credentials/*"} {
		r.Options(p, s.originOnly(s.preflight))
	}
	if s.opts.MCP != nil {
		r.Options("/mcp", s.originOnly(s.preflight))
		r.Options("/mcp/{toolset}", s.originOnly(s.preflight))
	}
	s.consentRoutes(r)
	// The console: static assets behind the same Origin and Host checks;
	// its pages call the routes above with the user's key or session.
	page := s.originOnly(console.Handler(http.HandlerFunc(s.notFound)).ServeHTTP)
	r.Get("/console", page)
	r.Get("/console/*", page)
}
