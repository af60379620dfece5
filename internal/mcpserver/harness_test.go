package mcpserver_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/mcpserver"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/server"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/await"
	"github.com/toold/toold/internal/tools/diag"
)

// The keys of the harness: one for every tool, one for echo only, and a
// person who approves.
const (
	fullKey     = "toold_full_key_for_mcp_tests_0123"
	echoKey     = "toold_echo_key_for_mcp_tests_0123"
	approverKey = "toold_approver_key_for_mcp_test01"
)

// harness is a real toold stack — dispatcher, REST server, /mcp — on
// loopback, plus its live registry so tests can change the tools.
type harness struct {
	t    *testing.T
	url  string
	live *registry.Live
	mcp  *mcpserver.Server
	slow *slowTool
}

type harnessOpts struct {
	keys    bool
	origins []string
	maxBody int64
	// store runs an embedded state store and the executions service, for
	// the tools that pause.
	store bool
	// tracer traces the stack.
	tracer trace.Tracer
	// noFast leaves every /mcp request to the SDK.
	noFast bool
	// toolsets are served at /mcp/<toolset>, with search_tools.
	toolsets registry.Toolsets
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h, handler := newStack(t, o)
	hs := httptest.NewUnstartedServer(handler)
	hs.Listener.Close()
	var err error
	if hs.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(hs.Close)
	h.t, h.url = t, hs.URL
	return h
}

// newBenchHarness is the same stack, served in process, logging nothing.
func newBenchHarness(b *testing.B, o harnessOpts) http.Handler {
	_, handler := newStack(b, o)
	return handler
}

// newStack builds toold's stack: registry, dispatcher, REST server, /mcp.
func newStack(tb testing.TB, o harnessOpts) (*harness, http.Handler) {
	tb.Helper()
	slow := &slowTool{started: make(chan struct{}, 8), ended: make(chan error, 8)}
	ts := append([]tools.Tool{diag.Echo(), diag.Sleep(), slow, streamTool{}, dangerTool{}, failTool{}, approvedTool{}, askFirstTool{},
		approvedAskTool{}},
		await.Tools(await.Options{})...)
	var live *registry.Live
	if o.toolsets != nil {
		ts = append(ts, searchTool(func() *registry.Registry { return live.Load() }))
	}
	reg, err := registry.New(registry.Options{}, ts...)
	if err != nil {
		tb.Fatal(err)
	}
	live = registry.NewLive(reg, registry.Options{})
	log := zap.NewNop()
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	lim := limits.New(limits.Options{})
	live.Subscribe(func(r *registry.Registry) { lim.Register(r.Entries()...) })
	var observers []dispatch.Observer
	var st *state.Store
	var rec *events.Recorder
	if o.store {
		st = statetest.Open(tb, nil, "mcp")
		rec = events.NewRecorder(events.Options{Store: st, FlushInterval: 5 * time.Millisecond})
		go rec.Run()
		tb.Cleanup(rec.Close)
		observers = append(observers, rec)
	}
	disp, err := dispatch.New(dispatch.Options{Registry: live, Limiter: lim, Sanitizer: san, Logger: log, Observers: observers, Tracer: o.tracer})
	if err != nil {
		tb.Fatal(err)
	}
	ex, err := executions.New(executions.Options{Store: st, Dispatcher: disp, Recorder: rec, Heartbeat: 100 * time.Millisecond, Workers: 4,
		Tracer: o.tracer})
	if err != nil {
		tb.Fatal(err)
	}
	if err := ex.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ex.Close)
	var keys []auth.Key
	if o.keys {
		keys = []auth.Key{{Name: "full", SHA256: auth.Hash(fullKey), Tools: []string{"*"}},
			{Name: "echo-only", SHA256: auth.Hash(echoKey), Tools: []string{"echo"}},
			{Name: "approver", SHA256: auth.Hash(approverKey), Tools: []string{"*"}, Roles: []auth.Role{auth.RoleApprove}}}
	}
	kr, err := auth.NewKeyring(keys)
	if err != nil {
		tb.Fatal(err)
	}
	ms := mcpserver.New(mcpserver.Options{Dispatcher: disp, Registry: live, Logger: log, Version: "test", MaxBodyBytes: o.maxBody,
		Executions: ex, Tracer: o.tracer, NoFastPath: o.noFast, Toolsets: o.toolsets})
	handlers := map[string]http.Handler{}
	for name := range o.toolsets {
		handlers[name], _ = ms.ToolsetHandler(name)
	}
	srv, err := server.New(server.Options{Dispatcher: disp, Keyring: kr, Logger: log, OpenAPI: api.OpenAPI,
		AllowedOrigins: o.origins, MaxBodyBytes: o.maxBody, MCP: ms.Handler(), Executions: ex, Store: st, Recorder: rec,
		SelfApproval: true, Tracer: o.tracer, Toolsets: o.toolsets, MCPToolsets: handlers})
	if err != nil {
		tb.Fatal(err)
	}
	return &harness{live: live, mcp: ms, slow: slow}, srv.Handler()
}

// client connects the official Go SDK's client to /mcp at the protocol
// version given, with every response held to api/openapi.yaml.
func (h *harness) client(version, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	return h.clientAt("/mcp", version, key, opts)
}

// clientAt is client, connected to path (a toolset's /mcp/<toolset>).
func (h *harness) clientAt(path, version, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	return h.clientVia(path, version, key, opts, nil)
}

// clientVia is clientAt whose HTTP transport wrap wraps (when not nil).
func (h *harness) clientVia(path, version, key string, opts *mcp.ClientOptions, wrap func(http.RoundTripper) http.RoundTripper) *mcp.ClientSession {
	h.t.Helper()
	var rt http.RoundTripper = apitest.Bearer(key, apitest.Checker(h.t, http.DefaultTransport))
	if wrap != nil {
		rt = wrap(rt)
	}
	hc := &http.Client{Transport: rt}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url + path, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		h.t.Fatalf("connect at %s: %v", version, err)
	}
	h.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// slowTool runs until its context ends and reports how it ended.
type slowTool struct {
	started chan struct{}
	ended   chan error
}

func (*slowTool) Spec() tools.Spec {
	return tools.Spec{Name: "slow", Description: "Waits until cancelled.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`), Effects: tools.Effects{ReadOnly: true}}
}

func (s *slowTool) Execute(ctx context.Context, _ *tools.Call) (any, error) {
	s.started <- struct{}{}
	select {
	case <-ctx.Done():
		s.ended <- ctx.Err()
		return nil, ctx.Err()
	case <-time.After(4 * time.Second):
		s.ended <- nil
		return map[string]any{"slept": true}, nil
	}
}

// streamTool emits two chunks, one holding a secret, then answers.
type streamTool struct{}

func (streamTool) Spec() tools.Spec {
	return tools.Spec{Name: "stream", Description: "Streams two lines.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (streamTool) Execute(ctx context.Context, call *tools.Call) (any, error) {
	call.Emit("stdout", "first line\n")
	call.Emit("stdout", "token ghp_0123456789abcdefghijABCDEFGHIJ012345\n")
	return map[string]any{"lines": 2}, nil
}

// dangerTool needs confirmation and counts its runs.
type dangerTool struct{}

var dangerRuns = struct {
	sync.Mutex
	n int
}{}

func (dangerTool) Spec() tools.Spec {
	return tools.Spec{Name: "danger", Description: "Deletes a thing.", Category: tools.Direct, Confirmation: tools.ConfirmToken,
		Parameters: json.RawMessage(`{"type":"object","properties":{"what":{"type":"string"}},"required":["what"]}`)}
}

func (dangerTool) Execute(ctx context.Context, call *tools.Call) (any, error) {
	dangerRuns.Lock()
	dangerRuns.n++
	dangerRuns.Unlock()
	return map[string]any{"deleted": true}, nil
}

// failTool fails with a user error.
type failTool struct{}

func (failTool) Spec() tools.Spec {
	return tools.Spec{Name: "fail", Description: "Always fails.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (failTool) Execute(context.Context, *tools.Call) (any, error) {
	return nil, tools.NewUserError("the thing is missing").WithSuggestion("create it first")
}

// askFirstTool is always down, and falls back to request_user_input.
type askFirstTool struct{}

func (askFirstTool) Spec() tools.Spec {
	return tools.Spec{Name: "ask_first", Description: "Down; its fallback asks the user.", Category: tools.Direct,
		Fallback:   []string{"request_user_input"},
		Parameters: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)}
}

func (askFirstTool) Execute(context.Context, *tools.Call) (any, error) {
	return nil, tools.Errorf(tools.SystemError, "the service is down").WithCode("upstream_unavailable")
}

// approvedTool waits for a person's approval before it runs.
type approvedTool struct{}

func (approvedTool) Spec() tools.Spec {
	return tools.Spec{Name: "guarded", Description: "Needs an approver.", Category: tools.Direct, Confirmation: tools.ConfirmHuman,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (approvedTool) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]any{"ran": true}, nil
}

// approvedAskTool waits for an approver, then asks the user a question,
// and answers with the answer.
type approvedAskTool struct{}

func (approvedAskTool) Spec() tools.Spec {
	return tools.Spec{Name: "guarded_ask", Description: "Needs an approver, then asks the user.", Category: tools.Direct,
		Confirmation: tools.ConfirmHuman, Pauses: true, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (approvedAskTool) Execute(_ context.Context, call *tools.Call) (any, error) {
	if call.Resume == nil {
		return nil, &tools.Pause{Input: &tools.InputRequest{Prompt: "Which release?"}}
	}
	return map[string]any{"answer": call.Resume.Answer}, nil
}
