package upstream

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// rig is toold's pipeline over a live registry that upstream servers fill.
type rig struct {
	t       *testing.T
	live    *registry.Live
	disp    *dispatch.Dispatcher
	m       *Manager
	logs    *observer.ObservedLogs
	metrics *prometheus.Registry
}

func newRig(t *testing.T, cfgs ...Config) *rig {
	t.Helper()
	return newRigBackoff(t, 20*time.Millisecond, 200*time.Millisecond, cfgs...)
}

// newRigBackoff is newRig with the reconnect backoff given.
func newRigBackoff(t *testing.T, minBackoff, maxBackoff time.Duration, cfgs ...Config) *rig {
	t.Helper()
	first, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, live: registry.NewLive(first, registry.Options{}), metrics: prometheus.NewRegistry()}
	core, logs := observer.New(zap.DebugLevel)
	r.logs = logs
	log := zap.New(core)
	lim := limits.New(limits.Options{Registerer: r.metrics, ServerCaps: ServerCaps(cfgs)})
	r.live.Subscribe(func(reg *registry.Registry) { lim.Register(reg.Entries()...) })
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.disp, err = dispatch.New(dispatch.Options{Registry: r.live, Limiter: lim, Sanitizer: san, Logger: log}); err != nil {
		t.Fatal(err)
	}
	root := 0
	l, err := launch.New(launch.Config{Containment: "none", RunAs: launch.RunAs{UID: &root, GID: &root}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	r.m, err = New(cfgs, Options{SetTools: r.live.SetSource, Launcher: l, Logger: log, Registerer: r.metrics,
		MinBackoff: minBackoff, MaxBackoff: maxBackoff})
	if err != nil {
		t.Fatal(err)
	}
	r.m.Start()
	t.Cleanup(func() { _ = r.m.Close() })
	return r
}

// peer declares this test binary as a stdio server behaving as mode.
func peer(t *testing.T, name, mode string) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Most of the peer's tools claim nothing, which makes them destructive
	// (MCP's default): these tests are about calls, not approvals
	// (TestEffectiveAnnotations is), so none waits for a person.
	return Config{Name: name, Command: exe, Args: []string{"-test.run=^$"}, Env: map[string]string{peerEnv: mode},
		Sandbox: launch.Sandbox{Containment: "none"}, ConnectTimeout: 5 * time.Second, ConfirmDestructive: "none"}
}

func (r *rig) call(tool, args string) *dispatch.Envelope {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.disp.Execute(ctx, &dispatch.Request{Tool: tool, Body: []byte(args), RequestID: "t", Caller: "test"})
}

// metric is the value of the series of name with exactly these labels, or
// -1 when there is none.
func (r *rig) metric(name string, labels map[string]string) float64 {
	r.t.Helper()
	mfs, err := r.metrics.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if maps.Equal(got, labels) {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func (r *rig) tools() []string {
	var out []string
	for _, e := range r.live.Load().Entries() {
		out = append(out, e.Spec.Name)
	}
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func data(t *testing.T, env *dispatch.Envelope) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(env.Data, &m); err != nil {
		t.Fatalf("data %s: %v", env.Data, err)
	}
	return m
}

// TestStdioServer: an upstream process's tools are served through the
// pipeline — toold validates before the upstream sees a call, results and
// errors map to the envelope, hints to effects, progress to the stream.
func TestStdioServer(t *testing.T) {
	r := newRig(t, peer(t, "p", "sdk"))
	names := strings.Join(r.tools(), " ")
	for _, want := range []string{"p.echo", "p.slow", "p.crash", "p.fail", "p.image", "p.progress"} {
		if !strings.Contains(names, want) {
			t.Errorf("tools %q lack %s", names, want)
		}
	}
	e, _ := r.live.Load().Lookup("p.echo")
	if e.Spec.Category != tools.MCP || e.Spec.Source != "p" || !e.Spec.Effects.ReadOnly || e.Spec.Effects.Destructive || e.Spec.Output == nil {
		t.Errorf("p.echo spec: %+v", e.Spec)
	}
	if d, _ := r.live.Load().Lookup("p.slow"); !d.Spec.Effects.Destructive || !d.Spec.Effects.OpenWorld {
		t.Errorf("a tool without hints must be destructive and open-world: %+v", d.Spec.Effects)
	}

	env := r.call("p.echo", `{"message":"hi"}`)
	if !env.Success || data(t, env)["message"] != "hi" || data(t, env)["calls"] != 1.0 {
		t.Fatalf("echo: %+v %s", env.Error, env.Data)
	}
	env = r.call("p.echo", `{"message":7}`)
	if env.Error == nil || env.Error.Type != tools.ValidationError {
		t.Fatalf("toold must validate: %+v", env.Error)
	}
	if got := data(t, r.call("p.echo", `{"message":"again"}`))["calls"]; got != 2.0 {
		t.Errorf("the upstream saw the invalid call: calls = %v", got)
	}

	env = r.call("p.fail", `{}`)
	if env.Error == nil || env.Error.Type != tools.UserError || !strings.Contains(env.Error.Message, "upstream says no") ||
		strings.Contains(env.Error.Message, "AKIAZ7QVXW5KJ2LPR4MN") {
		t.Errorf("isError as a redacted user_error: %+v", env.Error)
	}

	env = r.call("p.image", `{}`)
	d := data(t, env)
	blocks, _ := d["content"].([]any)
	if d["text"] != "a pixel" || len(blocks) != 3 {
		t.Fatalf("content blocks: %s", env.Data)
	}
	img, _ := blocks[1].(map[string]any)
	link, _ := blocks[2].(map[string]any)
	if img["type"] != "image" || img["mime_type"] != "image/png" || img["data"] != "iVBORw0K" || img["bytes"] != 6.0 ||
		link["type"] != "resource_link" || link["uri"] != "file:///x.txt" {
		t.Errorf("blocks: %v", blocks)
	}

	var mu sync.Mutex
	var chunks []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	env = r.disp.Execute(ctx, &dispatch.Request{Tool: "p.progress", Body: []byte(`{}`), Emit: func(c tools.Chunk) {
		mu.Lock()
		chunks = append(chunks, c.Data)
		mu.Unlock()
	}})
	mu.Lock()
	if !env.Success || strings.Join(chunks, "") != "step 1\nstep 2\nstep 3\n" {
		t.Errorf("progress: %v %q", env.Error, chunks)
	}
	mu.Unlock()
	// echo twice (the invalid call never left toold), image, progress.
	if got := testutil.ToFloat64(r.m.metrics.calls.WithLabelValues("p", "success")); got != 4 {
		t.Errorf("calls{success} = %v, want 4", got)
	}
	if got := testutil.ToFloat64(r.m.metrics.calls.WithLabelValues("p", "tool_error")); got != 1 {
		t.Errorf("calls{tool_error} = %v, want 1", got)
	}
}

// TestCrashMidCall: a server that dies during a call fails that call as
// retryable, refuses new calls with a retry hint until it is back, and is
// reconnected on its own.
func TestCrashMidCall(t *testing.T) {
	r := newRig(t, peer(t, "p", "sdk"))
	env := r.call("p.crash", `{}`)
	if env.Error == nil || env.Error.Code != "upstream_unavailable" || env.Error.Type != tools.SystemError || !env.Error.Retryable {
		t.Fatalf("the call in flight: %+v", env.Error)
	}
	waitFor(t, "a reconnect", 10*time.Second, func() bool {
		return testutil.ToFloat64(r.m.metrics.reconnects.WithLabelValues("p")) == 1 && r.m.States()["p"] == "up"
	})
	if env := r.call("p.echo", `{"message":"back"}`); !env.Success {
		t.Fatalf("after the reconnect: %+v", env.Error)
	}
}

// TestDownServerRefusesWithRetryAfter: while a server is away, its tools
// answer overload_error upstream_unavailable with a retry hint (503).
func TestDownServerRefusesWithRetryAfter(t *testing.T) {
	// A backoff of 3 s: the reconnect comes 1.5 to 3 s after the loss,
	// time enough to call the server while it is down.
	r := newRigBackoff(t, 3*time.Second, 3*time.Second, peer(t, "p", "sdk"))
	s := r.m.servers[0]
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	// Close the session under the server: calls see it gone.
	_ = sess.Close()
	waitFor(t, "the server to be down", 5*time.Second, func() bool { return r.m.States()["p"] == "down" })
	env := r.call("p.echo", `{"message":"x"}`)
	if env.Error == nil || env.Error.Type != tools.OverloadError || env.Error.Code != "upstream_unavailable" || env.Error.RetryAfterMS < 1000 {
		t.Fatalf("a call to a server that is down: %+v", env.Error)
	}
	waitFor(t, "the reconnect", 10*time.Second, func() bool { return r.m.States()["p"] == "up" })
}

// TestHangingInitialize: a server that never answers initialize is given
// up at the connect timeout; toold starts anyway, and readiness says which
// required server is missing.
func TestHangingInitialize(t *testing.T) {
	c := peer(t, "h", "hang")
	c.ConnectTimeout = 300 * time.Millisecond
	c.Required = true
	start := time.Now()
	r := newRig(t, c)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Start took %v with a hanging server", d)
	}
	if err := r.m.Ready(); err == nil || !strings.Contains(err.Error(), "h") {
		t.Errorf("Ready = %v", err)
	}
	if len(r.tools()) != 0 {
		t.Errorf("tools of a server that never initialized: %v", r.tools())
	}
	if !r.logged("MCP server unavailable", "no answer") {
		t.Error("the timeout was not logged")
	}
}

func (r *rig) logged(msg, errPart string) bool {
	for _, e := range r.logs.FilterMessage(msg).All() {
		for _, f := range e.Context {
			if f.Key == "error" && strings.Contains(f.Interface.(error).Error(), errPart) {
				return true
			}
		}
	}
	return false
}

// TestListChanged: a list_changed notification re-lists the server and
// swaps its tools in the registry.
func TestListChanged(t *testing.T) {
	r := newRig(t, peer(t, "p", "sdk"))
	if env := r.call("p.flip", `{}`); !env.Success {
		t.Fatal(env.Error)
	}
	waitFor(t, "p.added", 5*time.Second, func() bool { _, ok := r.live.Load().Lookup("p.added"); return ok })
	if env := r.call("p.added", `{}`); !env.Success || data(t, env)["text"] != "new" {
		t.Errorf("the new tool: %+v %s", env.Error, env.Data)
	}
}

// TestGarbage: a server that answers a call with bytes that are not
// JSON-RPC loses its connection, the call fails as retryable, and toold
// goes on.
func TestGarbage(t *testing.T) {
	r := newRig(t, peer(t, "g", "garbage"))
	env := r.call("g.g", `{}`)
	if env.Error == nil || env.Error.Code != "upstream_unavailable" {
		t.Fatalf("garbage: %+v", env.Error)
	}
	waitFor(t, "a reconnect", 10*time.Second, func() bool {
		return testutil.ToFloat64(r.m.metrics.reconnects.WithLabelValues("g")) >= 1
	})
}

// TestInvalidUTF8: a message that is not UTF-8 is refused by the SDK's
// decoder, which ends the connection: the call fails as retryable, no byte
// of it reaches a caller, and the server comes back.
func TestInvalidUTF8(t *testing.T) {
	r := newRig(t, peer(t, "u", "utf8"))
	env := r.call("u.u", `{}`)
	if env.Error == nil || env.Error.Code != "upstream_unavailable" || !env.Error.Retryable || len(env.Data) != 0 {
		t.Fatalf("utf8: %+v %q", env.Error, env.Data)
	}
	waitFor(t, "a reconnect", 10*time.Second, func() bool {
		return testutil.ToFloat64(r.m.metrics.reconnects.WithLabelValues("u")) >= 1 && r.m.States()["u"] == "up"
	})
}

// TestHugeResults: a result over the output cap is truncated with a
// marker; a message over max_message_bytes ends the connection, which
// comes back.
func TestHugeResults(t *testing.T) {
	c := peer(t, "p", "sdk")
	c.MaxMessageBytes = 2 << 20
	r := newRig(t, c)
	env := r.call("p.big", `{"bytes":1500000}`)
	if !env.Success || !env.Sanitized.Truncated || len(env.Data) > 1<<20+4096 {
		t.Fatalf("1.5 MB result: %+v truncated=%v %d bytes", env.Error, env.Sanitized.Truncated, len(env.Data))
	}
	env = r.call("p.big", `{"bytes":3000000}`)
	if env.Error == nil || env.Error.Code != "upstream_unavailable" {
		t.Fatalf("a message over the cap: %+v", env.Error)
	}
	waitFor(t, "a reconnect", 10*time.Second, func() bool { return r.m.States()["p"] == "up" })
}

// TestToolsThatCannotBeServed: duplicate, invalid or over-long names, a
// schema that is not an object, and a remote $ref (never fetched) are each
// skipped with a warning naming them; the rest is served.
func TestToolsThatCannotBeServed(t *testing.T) {
	var fetched atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fetched.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	t.Setenv("TOOLD_PEER_REF_URL", "http://"+ln.Addr().String()+"/schema.json")
	c := peer(t, "c", "collide")
	c.EnvAllow = []string{"TOOLD_PEER_REF_URL"}
	r := newRig(t, c)
	if got := strings.Join(r.tools(), " "); got != "c.ok" {
		t.Errorf("served %q, want only c.ok", got)
	}
	if got := testutil.ToFloat64(r.m.metrics.tools.WithLabelValues("c")); got != 1 {
		t.Errorf("toold_mcp_upstream_tools{server=c} = %v, want the 1 tool served", got)
	}
	warned := ""
	for _, e := range r.logs.FilterMessage("skipping an upstream tool").All() {
		for _, f := range e.Context {
			if f.Key == "error" {
				warned += f.Interface.(error).Error() + "\n"
			}
		}
	}
	for _, want := range []string{`"c.ok": the name is taken`, `"c.bad name!"`, `"c.lll`, `"c.notobj"`, `"c.ref"`} {
		if !strings.Contains(warned, want) {
			t.Errorf("no warning naming %s in:\n%s", want, warned)
		}
	}
	if fetched.Load() != 0 {
		t.Errorf("a remote $ref was fetched %d times", fetched.Load())
	}
}

// TestServerCap: max_in_flight bounds the calls on one server over all its
// tools; beyond it the pipeline's limiter refuses a call at once, as any
// bulkhead refusal: rejected, with a Retry-After estimate, counted.
func TestServerCap(t *testing.T) {
	c := peer(t, "p", "sdk")
	c.MaxInFlight = 1
	r := newRig(t, c)
	started := make(chan *dispatch.Envelope)
	go func() { started <- r.call("p.slow", `{"ms":1500}`) }()
	waitFor(t, "the first call to hold the slot", 5*time.Second, func() bool {
		return r.metric("toold_tool_in_flight", map[string]string{"tool": "p.slow"}) == 1
	})
	env := r.call("p.echo", `{"message":"x"}`)
	if env.Status != dispatch.StatusRejected || env.Error == nil || env.Error.Type != tools.OverloadError ||
		env.Error.Code != "server_capacity" || env.Error.RetryAfterMS == 0 {
		t.Errorf("over the server's cap: %s %+v", env.Status, env.Error)
	}
	if got := r.metric("toold_tool_rejections_total", map[string]string{"tool": "p.echo", "reason": "server_capacity"}); got != 1 {
		t.Errorf("server_capacity rejections of p.echo: %v", got)
	}
	if first := <-started; !first.Success {
		t.Errorf("the first call: %+v", first.Error)
	}
}

// TestHTTPServer: a server over Streamable HTTP, with the configured
// headers on every request; when it goes away its calls fail as retryable
// and toold reconnects once it is back.
func TestHTTPServer(t *testing.T) {
	var authorized atomic.Int64
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return peerServer() }, nil)
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-upstream-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := httptest.NewUnstartedServer(guarded)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	r := newRig(t, Config{Name: "web", URL: "http://" + addr + "/mcp", Allow: []string{"127.0.0.1"}, AllowHTTP: true,
		Headers: map[string]string{"Authorization": "Bearer s3cret-upstream-token"}, ConnectTimeout: 5 * time.Second})
	if env := r.call("web.echo", `{"message":"over http"}`); !env.Success || data(t, env)["message"] != "over http" {
		t.Fatalf("echo over HTTP: %+v", env.Error)
	}
	if authorized.Load() == 0 {
		t.Error("the headers were not sent")
	}
	srv.CloseClientConnections()
	srv.Close()
	env := r.call("web.echo", `{"message":"gone"}`)
	if env.Error == nil || !env.Error.Retryable {
		t.Fatalf("a call to a server that went away: %+v", env.Error)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv2 := &http.Server{Handler: guarded}
	go func() { _ = srv2.Serve(ln2) }()
	t.Cleanup(func() { _ = srv2.Close() })
	waitFor(t, "the reconnect", 10*time.Second, func() bool {
		return r.call("web.echo", `{"message":"back"}`).Success
	})
	for _, e := range r.logs.All() {
		for _, f := range e.Context {
			if strings.Contains(f.String, "s3cret") || (f.Interface != nil && strings.Contains(fmtAny(f.Interface), "s3cret")) {
				t.Errorf("a header reached the log: %v", e)
			}
		}
	}
}

func fmtAny(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestConfigRefused(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		say  string
	}{
		{"no name", Config{Command: "x"}, "name"},
		{"dot in name", Config{Name: "a.b", Command: "x"}, "name"},
		{"neither", Config{Name: "a"}, "command or url"},
		{"both", Config{Name: "a", Command: "x", URL: "https://x"}, "not both"},
		{"bad url", Config{Name: "a", URL: "ftp://x"}, "not an http(s) URL"},
		{"args with url", Config{Name: "a", URL: "https://x", Args: []string{"-v"}}, "only for a server started with command"},
		{"headers with command", Config{Name: "a", Command: "x", Headers: map[string]string{"A": "b"}}, "only for a server reached by url"},
		{"loopback not allowed", Config{Name: "a", URL: "https://127.0.0.1:1/mcp"}, "refused"},
		{"http not allowed", Config{Name: "a", URL: "http://mcp.example.com/mcp"}, "refused"},
		{"metadata", Config{Name: "a", URL: "https://169.254.169.254/mcp", Allow: []string{"169.254.0.0/16"}}, "refused"},
		{"bad pattern", Config{Name: "a", Command: "x", Tools: Filter{Allow: []string{"["}}}, "malformed"},
		{"env in the sandbox", Config{Name: "a", Command: "x", Sandbox: launch.Sandbox{Env: map[string]string{"A": "b"}}}, "set on the server itself"},
		{"output cap", Config{Name: "a", Command: "x", Sandbox: launch.Sandbox{MaxOutputBytes: 10}}, "max_message_bytes"},
		{"relative read-only path", Config{Name: "a", Command: "x", Sandbox: launch.Sandbox{ReadOnlyPaths: []string{"opt"}}},
			`sandbox.read_only_paths: "opt" is not absolute`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.c.Check(); err == nil || !strings.Contains(err.Error(), tt.say) {
				t.Errorf("Check = %v, want one saying %q", err, tt.say)
			}
		})
	}
	if _, err := New([]Config{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, Options{Launcher: &launch.Launcher{}}); err == nil ||
		!strings.Contains(err.Error(), "used twice") {
		t.Errorf("duplicate names: %v", err)
	}
}
