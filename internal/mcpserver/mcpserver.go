// Package mcpserver serves toold's tools over the Model Context Protocol:
// Streamable HTTP at /mcp (stateless, so any replica answers any request)
// and stdio for hosts that launch servers as processes. It translates and
// never decides: every tools/call becomes a dispatch.Request and goes
// through dispatch.Execute — validation, sanitizers, bulkhead, deadline,
// confirmation, metrics — exactly as a REST call does; the envelope is then
// rendered as an MCP result. The official Go SDK speaks the protocol; the
// tools are registered with its low-level Server.AddTool and their raw
// schemas, so validation stays toold's.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/catalog"
	"github.com/toold/toold/internal/tracing"
)

// Options configure a Server.
type Options struct {
	Dispatcher *dispatch.Dispatcher
	// Registry is the live set of tools; the server follows its changes
	// and tells the clients that hold a session.
	Registry *registry.Live
	Logger   *zap.Logger
	// Version is toold's version, shown to clients.
	Version string
	// MaxBodyBytes caps an HTTP request body (default 1 MiB).
	MaxBodyBytes int64
	// Bodies reads HTTP request bodies under the byte budget and read
	// deadline the REST routes share; nil makes a reader of its own.
	Bodies *reqbody.Reader
	// Executions keeps the calls that pause (nil or without a store:
	// such calls are refused).
	Executions *executions.Service
	// Tracer, when set, gives every tools/call a span, a child of the
	// client's when its _meta carries a traceparent; nil is tracing off.
	Tracer trace.Tracer
	// Toolsets are served at /mcp/<toolset> (see ToolsetHandler).
	Toolsets registry.Toolsets
	// NoFastPath leaves every HTTP request to the SDK (see fastpath.go);
	// the tests compare the two paths with it.
	NoFastPath bool
	// StdioPrincipal is the caller at the other end of ServeStdio: the
	// key the operator named (-stdio-key); nil is the local user with
	// every tool and role, for a toold without keys.
	StdioPrincipal *auth.Principal
	// StdioDrain bounds how long ServeStdio, its input closed, goes on
	// answering what it read (default DefaultStdioDrain).
	StdioDrain time.Duration
	// SessionSecret signs the session ids /mcp gives clients it may ask
	// things (session.go); replicas with the same secret read each
	// other's. Empty draws one for this process.
	SessionSecret []byte
	// Artifacts reads the results kept whole beside their heads (see
	// artifacts.go); nil: no resource is offered.
	Artifacts Artifacts
}

// Server is toold's MCP server; build it with New.
type Server struct {
	opts  Options
	log   *zap.Logger
	sdk   *mcp.Server
	calls *inflight
	// asks are toold's own requests to clients awaiting an answer here.
	asks     *asks
	sessions *sessionKeys

	mu sync.Mutex // guards served, names and the toolsets' lists
	// served is what the whole catalog's SDK server serves, by MCP name.
	served map[string]*registry.Entry
	// names holds every tool under both the name MCP clients see (its
	// function name) and its canonical name, an alias every route accepts
	// (see names.go).
	names map[string]*registry.Entry
	// toolsets serve each toolset's subset (toolsets.go).
	toolsets map[string]*toolsetServer
}

// New builds the server with every tool of the registry and follows the
// registry's changes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Server{opts: opts, log: opts.Logger, calls: newInflight(), served: map[string]*registry.Entry{}, names: map[string]*registry.Entry{},
		asks: newAsks(), sessions: newSessionKeys(opts.SessionSecret)}
	s.sdk = s.newSDK("")
	s.sync(opts.Registry.Load())
	opts.Registry.Subscribe(s.sync)
	s.startToolsets()
	return s
}

// newSDK is an SDK server as toold serves it, with no tools yet; more is
// said to the client after toold's own instructions (a toolset's
// description).
func (s *Server) newSDK(more string) *mcp.Server {
	instructions := "toold hosts tools for agents. Every call is validated, sanitized and bounded; a failed call " +
		"returns isError with a message and a suggestion saying what to change."
	if more != "" {
		instructions += "\n\n" + more
	}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if s.opts.Artifacts != nil {
		caps.Resources = &mcp.ResourceCapabilities{}
	}
	sdk := mcp.NewServer(&mcp.Implementation{Name: "toold", Title: "toold", Version: s.opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLogger(s.opts.Logger),
		Capabilities: caps,
	})
	if s.opts.Artifacts != nil {
		t := artifactTemplate
		sdk.AddResourceTemplate(&t, s.readArtifact)
	}
	sdk.AddReceivingMiddleware(s.middleware)
	return sdk
}

// CancelAll cancels every call in flight with cause — at the end of the
// drain's grace, when the HTTP requests' contexts are cancelled too: the
// SDK does not tie an older client's call to its request's context.
func (s *Server) CancelAll(cause error) { s.calls.cancelAll(cause) }

// sync makes the SDK's tool list the registry's: tools whose entry changed
// are added again (replacing), vanished ones removed. The SDK tells every
// client holding a session (stdio, or a 2026-07-28 subscription).
func (s *Server) sync(r *registry.Registry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncTools(s.sdk, s.served, r, nil)
	names := make(map[string]*registry.Entry, 2*r.Len())
	for _, e := range r.Entries() {
		names[e.FunctionName()], names[e.Spec.Name] = e, e
	}
	s.names = names
}

// syncTools makes sdk's tool list the registry's tools that keep accepts
// (nil: all), each under its MCP name (its function name), served
// recording what sdk serves by that name: tools whose entry changed are
// added again (replacing), vanished ones removed. The SDK tells every
// client holding a session of sdk (stdio, or a 2026-07-28 subscription);
// a change that leaves sdk's list as it was tells nobody.
func (s *Server) syncTools(sdk *mcp.Server, served map[string]*registry.Entry, r *registry.Registry, keep func(*registry.Entry) bool) {
	var gone []string
	for name := range served {
		if e, ok := r.Lookup(r.Canonical(name)); !ok || e.FunctionName() != name || keep != nil && !keep(e) {
			gone = append(gone, name)
			delete(served, name)
		}
	}
	if len(gone) > 0 {
		sdk.RemoveTools(gone...)
	}
	for _, e := range r.Entries() {
		if served[e.FunctionName()] == e || keep != nil && !keep(e) {
			continue
		}
		served[e.FunctionName()] = e
		sdk.AddTool(sdkTool(e.MCP()), s.handler(e.Spec.Name))
	}
}

// sdkTool is the registry's MCP rendering in the SDK's type.
func sdkTool(t registry.MCPTool) *mcp.Tool {
	out := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.Annotations.ReadOnlyHint, DestructiveHint: t.Annotations.DestructiveHint,
			IdempotentHint: t.Annotations.IdempotentHint, OpenWorldHint: &t.Annotations.OpenWorldHint}}
	if t.OutputSchema != nil {
		out.OutputSchema = t.OutputSchema
	}
	return out
}

// middleware resolves a tool's canonical name to its MCP name (aliased),
// filters tools/list to the tools the caller may use (a key sees only its
// tools, as on GET /tools), redacts every error and failed result (see
// redacted), and adds what the SDK's types cannot say (capabilities.go):
// the tasks capability and extension, a tool's execution, a call answered
// with a task.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.aliased(method, req)
		res, err := s.redacted(next(ctx, method, req))
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			p, err := caller(ctx)
			if err != nil {
				return nil, err
			}
			return s.visibleTools(p, r), nil
		case *mcp.InitializeResult:
			if s.declaresTasks(ctx) {
				return withTasks{r}, nil
			}
		case *mcp.DiscoverResult:
			return s.discoverWithTasks(r), nil
		case *mcp.CallToolResult:
			if t, ok := r.Meta[metaTaskCreated].(taskV2); ok {
				return taskCreated{CallToolResult: r, task: t}, nil
			}
		}
		return res, nil
	}
}

// visibleTools is a tools/list result with the tools p sees (those it may
// use that the policy lets it list) and that can work in this mode
// (usable), each saying how it may be called.
func (s *Server) visibleTools(p *auth.Principal, r *mcp.ListToolsResult) mcp.Result {
	visible := make([]*mcp.Tool, 0, len(r.Tools))
	v := s.opts.Dispatcher.View(p.Who(), p.Allows, policy.ViaMCP)
	for _, t := range r.Tools {
		if e := s.entry(t.Name); e != nil && v.Shows(e) && s.usable(e) {
			visible = append(visible, t)
		}
	}
	cp := *r
	cp.Tools = s.describeSearch(visible)
	if x := s.executionOf(visible); x != nil {
		return withExecution{ListToolsResult: &cp, execution: x}
	}
	return &cp
}

// describeSearch renders search_tools, when the caller sees it, with the
// description of what the caller can find with it (catalog.Describe of
// the other visible tools).
func (s *Server) describeSearch(visible []*mcp.Tool) []*mcp.Tool {
	at := -1
	var search *registry.Entry
	others := make([]*registry.Entry, 0, len(visible))
	for i, t := range visible {
		switch e := s.entry(t.Name); {
		case e == nil:
		case e.Spec.Name == catalog.Name:
			at, search = i, e
		default:
			others = append(others, e)
		}
	}
	if search == nil {
		return visible
	}
	t := *visible[at]
	t.Description = search.WithDescription(catalog.Describe(registry.Integrations(others))).MCP().Description
	out := slices.Clone(visible)
	out[at] = &t
	return out
}

// usable reports whether e can work in this mode. A tool that always waits
// — for a person's answer (it pauses) or approval (confirmation: human) —
// needs the state store to keep the wait: without one (-stdio without
// state.dir or state.nats.url, or state.enabled: false) every call would
// be refused, so it is not listed, and a model is not offered a tool it
// would retry forever. (A call by name still gets a refusal saying why,
// not retryable: executions' no_store.)
func (s *Server) usable(e *registry.Entry) bool {
	waits := e.Spec.Pauses || e.Spec.Confirmation == tools.ConfirmHuman
	return !waits || s.opts.Executions.Durable()
}

// handler runs one tools/call through the pipeline.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		start := time.Now()
		if s.opts.Tracer != nil {
			var span trace.Span
			ctx, span = s.startSpan(ctx, req, name)
			defer func() { endSpan(span, res, err) }()
		}
		p, err := caller(ctx)
		if err != nil {
			return nil, err
		}
		ctx, done := s.calls.track(ctx, p.Name, rpcID(ctx))
		defer done()
		if id, ok := strings.CutPrefix(req.Params.RequestState, stateExec); ok {
			return s.resumed(ctx, req, p.Name, id)
		}
		dreq := dispatch.NewRequest(name, req.Params.Arguments, requestID(ctx),
			dispatch.From{Name: p.Name, Identity: p.Who(), Allowed: s.allowed(ctx, p)})
		dreq.Via = policy.ViaMCP
		if s.opts.Executions != nil {
			dreq.Lineage = s.opts.Executions.LineageFor(p.Name)
		}
		conf := confirmationOf(req)
		if conf.declined {
			return declined(name), nil
		}
		dreq.ConfirmToken = conf.token
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			dreq.Emit = progress(ctx, req.Session, tok)
		}
		env := s.opts.Dispatcher.Execute(ctx, dreq)
		if env.Error != nil && env.Error.Type == tools.ConfirmationRequired && !canElicit(req) {
			env = s.confirmThroughPeer(ctx, dreq, env)
		}
		s.logCall(ctx, env, p.Name, start)
		if env.Error != nil && (env.Error.Code == tools.CodeForbidden || env.Status == dispatch.StatusNotFound) {
			// A key that may not use the tool sees it as absent, exactly
			// as the SDK answers a tool that does not exist.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool \"" + name + "\""}
		}
		if env.Status == dispatch.StatusWaiting {
			return s.waited(ctx, req, dreq, env)
		}
		if env.Error != nil && env.Error.Type == tools.ConfirmationRequired {
			return confirmationResult(req, env, s.hasOutputSchema(name)), nil
		}
		if err := consentElicitation(ctx, req, env); err != nil {
			return nil, err
		}
		return render(env, s.hasOutputSchema(name)), nil
	}
}

// confirmThroughPeer asks an older client that can elicit to have its
// user confirm the call, and runs the call again with the token if they
// agreed; otherwise (no such client, no answer) env stands. A user who
// declined gets the declined failure.
func (s *Server) confirmThroughPeer(ctx context.Context, dreq *dispatch.Request, env *dispatch.Envelope) *dispatch.Envelope {
	p := peerOf(ctx)
	if !p.canAsk("confirm") {
		return env
	}
	switch accepted, answered := s.askConfirm(ctx, p, dreq.Caller, env); {
	case accepted:
		dreq.ConfirmToken = env.Error.ConfirmToken
		return s.opts.Dispatcher.Execute(ctx, dreq)
	case answered:
		return dispatch.Failure(env.RequestID, env.Tool, dispatch.StatusRejected, permissionDeclined())
	}
	return env
}

func (s *Server) hasOutputSchema(name string) bool {
	e := s.entry(name)
	return e != nil && e.ObjectOutput()
}

// logCall writes the call's line, with the fields of REST's access line:
// over stdio there is no HTTP request to log, and over HTTP one request
// may carry any call.
func (s *Server) logCall(ctx context.Context, env *dispatch.Envelope, caller string, start time.Time) {
	errType := ""
	if env.Error != nil {
		errType = string(env.Error.Type)
	}
	s.log.Info("mcp call", append(tracing.LogFields(ctx), zap.String("tool", s.opts.Registry.Load().LogName(env.Tool)), zap.String("outcome", string(env.Status)),
		zap.String("error_type", errType), zap.String("request_id", env.RequestID), zap.String("caller", caller),
		zap.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))...)
}

// progress turns streamed output into notifications/progress for a client
// that sent a progress token. Chunks are already sanitized by the pipeline.
func progress(ctx context.Context, ss *mcp.ServerSession, token any) func(tools.Chunk) {
	var mu sync.Mutex
	n := 0
	return func(c tools.Chunk) {
		mu.Lock()
		defer mu.Unlock()
		n++
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
			Message: c.Data, Meta: mcp.Meta{"toold/stream": c.Stream}})
	}
}

// errNoCaller is a request that reached the MCP server without a caller:
// /mcp mounted outside toold's authentication (internal/server's MCP
// group), or a stdio session started without its principal.
var errNoCaller = errors.New("mcpserver: the request has no authenticated caller")

// caller is the authenticated caller in the context: the one the HTTP
// side's authentication put there, or the stdio session's (ServeStdio,
// the -stdio-key's, or the local user's where no keys are configured). A
// context without one is an error, never a caller of its own: a handler
// mounted without toold's authentication must not serve anyone as the
// anonymous local user, who may use every tool.
func caller(ctx context.Context) (*auth.Principal, error) {
	if p := auth.FromContext(ctx); p != nil {
		return p, nil
	}
	return nil, errNoCaller
}

// noCaller is errNoCaller as a JSON-RPC error.
func noCaller() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the request has no authenticated caller"}
}

type requestIDKey struct{}

// WithRequestID gives the calls of one HTTP request that request's id, so
// the envelope, the call's log line and the access log line agree.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

func requestID(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok && id != "" {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
