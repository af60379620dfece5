package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/mcpserver"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/diag"
)

// harness is a real toold stack served over loopback HTTP on port 0.
type harness struct {
	t    *testing.T
	url  string
	srv  *Server
	st   *state.Store
	ex   *executions.Service
	logs *observer.ObservedLogs
	http *http.Client
	live *registry.Live
}

type harnessOpts struct {
	// toolsets and pinned configure search (Options.Toolsets,
	// Options.Pinned).
	toolsets registry.Toolsets
	pinned   []string
	// metrics, when set, receives the limiter's metrics.
	metrics *prometheus.Registry
	keys    []auth.Key
	origins []string
	maxBody int64
	tools   []tools.Tool
	limits  map[string]registry.Override
	// store runs the stack on an embedded state store (async executions,
	// idempotency, events, audit), with a fast heartbeat.
	store bool
	// st, when set, is the store (one replica of a pair: OpenPair).
	st *state.Store
	// exec adjusts the executions service's options.
	exec func(*executions.Options)
	// writeTimeout bounds each write of a response (Options.WriteTimeout).
	writeTimeout time.Duration
	// maxDepth bounds argument nesting (dispatch.Options.MaxDepth).
	maxDepth int
	// tracer traces the stack (dispatch, executions, server).
	tracer trace.Tracer
	// bodies, when set, configures the body reader (budget, timeout).
	bodies *reqbody.Options
	// withheld is Options.AnonymousWithheld.
	withheld func() string
	// mcp serves /mcp (and /mcp/<toolset> for each toolset) with toold's
	// MCP server over the same dispatcher.
	mcp bool
	// issuers are the trusted token issuers (Options.OAuth).
	issuers oauth.Issuers
	// principals bounds each principal (auth.limits).
	principals limits.PrincipalConfig
	// budget is the server's result budget (server.max_result_bytes);
	// with a store, results over it are kept as artifacts there.
	budget int64
}

// testTools are the tools most tests use: the diagnostics plus tools that
// fail in each way the pipeline must handle.
func testTools() []tools.Tool {
	return []tools.Tool{diag.Echo(), diag.Sleep(), panicTool{}, badOutputTool{}, failTool{}, stubbornTool{}}
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	if o.tools == nil {
		o.tools = testTools()
	}
	reg, err := registry.New(registry.Options{Overrides: o.limits}, o.tools...)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	var metricsReg prometheus.Registerer // a nil *Registry in an interface is not nil
	if o.metrics != nil {
		metricsReg = o.metrics
	}
	lim := limits.New(limits.Options{Registerer: metricsReg})
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st *state.Store
	var rec *events.Recorder
	var observers []dispatch.Observer
	if o.store || o.st != nil {
		st = o.st
		if st == nil {
			st = statetest.Open(t, metricsReg, "replica-a")
		}
		rec = events.NewRecorder(events.Options{Store: st, Audit: true, FlushInterval: 5 * time.Millisecond, Logger: log})
		go rec.Run()
		t.Cleanup(rec.Close)
		observers = append(observers, rec)
	}
	live := registry.NewLive(reg, registry.Options{})
	live.Subscribe(func(r *registry.Registry) { lim.Register(r.Entries()...) })
	do := dispatch.Options{Registry: live, Limiter: lim, Sanitizer: san,
		Logger: log, StuckAfter: 50 * time.Millisecond, Observers: observers, MaxDepth: o.maxDepth, Tracer: o.tracer,
		Principals: limits.NewPrincipals(o.principals, metricsReg), MaxResultBytes: o.budget}
	var artifacts mcpserver.Artifacts
	if st != nil {
		do.Artifacts, artifacts = st.Artifacts(), st.Artifacts()
	}
	disp, err := dispatch.New(do)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := auth.NewKeyring(o.keys)
	if err != nil {
		t.Fatal(err)
	}
	eo := executions.Options{Store: st, Dispatcher: disp, Recorder: rec, Logger: log, Heartbeat: 200 * time.Millisecond, Workers: 8,
		Allows: kr.Allows, Tracer: o.tracer}
	if o.exec != nil {
		o.exec(&eo)
	}
	ex, err := executions.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ex.Close)
	bo := reqbody.Options{MaxBytes: o.maxBody}
	if o.bodies != nil {
		bo = *o.bodies
	}
	bo.Registerer = metricsReg
	bodies := reqbody.New(bo)
	var verifier *oauth.Verifier
	if o.issuers != nil {
		if verifier, err = oauth.New(oauth.Options{Issuers: o.issuers, Logger: log}); err != nil {
			t.Fatal(err)
		}
		if st != nil { // as cmd/toold wires it: sign-outs where every replica reads them
			verifier.UseRevocations(st.RevokedSessions())
			verifier.UseSessionTokens(st.SessionTokens())
		}
	}
	var mcpHandler http.Handler
	var mcpToolsets map[string]http.Handler
	if o.mcp {
		ms := mcpserver.New(mcpserver.Options{Dispatcher: disp, Registry: live, Logger: log, Version: "test", Bodies: bodies,
			Executions: ex, Toolsets: o.toolsets, Artifacts: artifacts})
		mcpHandler, mcpToolsets = ms.Handler(), map[string]http.Handler{}
		for name := range o.toolsets {
			mcpToolsets[name], _ = ms.ToolsetHandler(name)
		}
	}
	srv, err := New(Options{Dispatcher: disp, Keyring: kr, OAuth: verifier, Logger: log, OpenAPI: api.OpenAPI, Bodies: bodies,
		AllowedOrigins: o.origins, MaxBodyBytes: o.maxBody, WriteTimeout: o.writeTimeout, Executions: ex, Store: st, Recorder: rec, Tracer: o.tracer,
		StuckCalls: lim.StuckCalls, Toolsets: o.toolsets, Pinned: o.pinned, AnonymousWithheld: o.withheld,
		MCP: mcpHandler, MCPToolsets: mcpToolsets})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener.Close()
	hs.Listener, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return &harness{t: t, url: hs.URL, srv: srv, logs: logs, st: st, ex: ex, live: live,
		http: &http.Client{Transport: apitest.Checker(t, http.DefaultTransport), Timeout: 10 * time.Second}}
}

// newBareServer is a Server with the test tools and the default sanitizer,
// not listening: for fuzz targets of its parsers.
func newBareServer(tb testing.TB) *Server {
	tb.Helper()
	reg, err := registry.New(registry.Options{}, testTools()...)
	if err != nil {
		tb.Fatal(err)
	}
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	disp, err := dispatch.New(dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Limiter: limits.New(limits.Options{}), Sanitizer: san})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Options{Dispatcher: disp})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
	env    dispatch.Envelope
}

func (h *harness) do(method, path string, body []byte, header map[string]string) *response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := &response{status: resp.StatusCode, header: resp.Header}
	r.body, _ = io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(r.body, &r.env)
	}
	return r
}

func (h *harness) exec(tool, body string, header map[string]string) *response {
	h.t.Helper()
	return h.do("POST", "/tools/"+tool+"/execute", []byte(body), header)
}

// counter counts its runs: a tool with a side effect, neither read-only
// nor idempotent.
type counter struct{ n *atomic.Int64 }

func (counter) Spec() tools.Spec {
	return tools.Spec{Name: "counter", Description: "Counts its calls.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"ms":{"type":"integer"}}}`)}
}
func (c counter) Execute(ctx context.Context, call *tools.Call) (any, error) {
	var in struct {
		Label string
		MS    int
	}
	_ = json.Unmarshal(call.Args, &in)
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return map[string]any{"label": in.Label, "count": c.n.Add(1)}, nil
}

// panicTool panics; the pipeline must answer system_error and live on.
type panicTool struct{}

func (panicTool) Spec() tools.Spec {
	return tools.Spec{Name: "panics", Description: "Panics.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (panicTool) Execute(context.Context, *tools.Call) (any, error) {
	panic("secret internal detail")
}

// badOutputTool returns a result its output schema refuses.
type badOutputTool struct{}

func (badOutputTool) Spec() tools.Spec {
	return tools.Spec{Name: "bad_output", Description: "Breaks its output schema.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`),
		Output:     json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)}
}
func (badOutputTool) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]any{"n": "not a number"}, nil
}

// failTool fails the way its "kind" argument says.
type failTool struct{}

func (failTool) Spec() tools.Spec {
	return tools.Spec{Name: "fail", Description: "Fails on purpose.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"kind":{"enum":["user","untyped","security"]}},"required":["kind"]}`)}
}
func (failTool) Execute(_ context.Context, c *tools.Call) (any, error) {
	var in struct{ Kind string }
	_ = json.Unmarshal(c.Args, &in)
	switch in.Kind {
	case "user":
		return nil, tools.NewUserError("the thing was not found").WithCode("not_found").WithSuggestion("try another thing")
	case "security":
		return nil, tools.NewSecurityError("that leaves the workspace").WithCode("path_escape")
	}
	return nil, errors.New("database password is hunter2")
}

// stubbornTool ignores its context for a while.
type stubbornTool struct{}

func (stubbornTool) Spec() tools.Spec {
	return tools.Spec{Name: "stubborn", Description: "Ignores cancellation.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}}}`),
		Limits:     tools.Limits{Timeout: 100 * time.Millisecond, Target: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxInFlight: 1, MaxQueue: 1}}
}
func (stubbornTool) Execute(_ context.Context, c *tools.Call) (any, error) {
	var in struct{ MS int }
	_ = json.Unmarshal(c.Args, &in)
	time.Sleep(time.Duration(in.MS) * time.Millisecond)
	return map[string]int{"slept_ms": in.MS}, nil
}

func zapString(k, v string) zap.Field { return zap.String(k, v) }
