package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/testpeer"
)

// tracePeerFlag starts this test binary as a stdio MCP server whose one
// tool answers with the trace context the call's _meta carried: a real
// server process, on the official SDK, that toold hosts as an upstream.
const tracePeerFlag = "-toold-trace-peer"

// TestMain starts this test binary as main starts toold: the sandbox shim
// first, then the hardening (harden_test.go's helper checks it), then, as
// asked, the trace peer or the tests.
func TestMain(m *testing.M) {
	launch.Shim()
	harden()
	if len(os.Args) > 1 && os.Args[1] == tracePeerFlag {
		s := mcp.NewServer(&mcp.Implementation{Name: "trace-peer", Version: "1"}, nil)
		// Read-only, as it says: a tool that claims nothing is destructive
		// and would wait for a person.
		mcp.AddTool(s, &mcp.Tool{Name: "traceparent", Description: "Says which trace the call belongs to.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
				tp, _ := req.Params.GetMeta()["traceparent"].(string)
				return nil, map[string]any{"traceparent": tp}, nil
			})
		_ = s.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// traceOf is the trace id of a traceparent ("" when malformed).
func traceOf(tp string) string {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// otlpSink accepts OTLP/HTTP exports and counts them: where toold's spans
// go in tests that are about what toold sends elsewhere.
func otlpSink(t *testing.T) (url string, exports *atomic.Int64) {
	exports = &atomic.Int64{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			exports.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(s.Close)
	return s.URL, exports
}

// openDir is a temporary directory the command sandbox's user (not
// toold's) may enter: t.TempDir's are private to toold's.
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "toold-trace-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// peerBinary copies this test binary where the command sandbox's user can
// run it.
func peerBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := openDir(t)
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "trace-peer")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestTracePropagation: a REST call carrying a W3C traceparent reaches an
// HTTP API tool, a stdio MCP server and a CLI in the caller's trace — each
// sees the caller's trace id, under a span of toold's — and an async
// execution run by a worker answers in that trace too.
func TestTracePropagation(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(api.Close)
	ws := openDir(t)
	cfg := filepath.Join(t.TempDir(), "trace.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
http:
  tools:
    - name: api
      description: A local API.
      parameters: {type: object}
      request: {url: "%s/"}
      allow: [127.0.0.1]
      allow_http: true
commands:
  tools:
    - name: show_trace
      description: Prints the trace context a process gets.
      argv: [printenv, TRACEPARENT]
mcp:
  servers:
    - name: peer
      command: %s
      args: [%s]
      required: true
`, api.URL, peerBinary(t), tracePeerFlag)), 0o644); err != nil {
		t.Fatal(err)
	}
	sink, exports := otlpSink(t)
	in := start(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink}, "-config", cfg, "-workspace", ws)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := in.get("/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %s\n%s", code, body, in.stderr)
		}
	}
	call := func(tool string, header map[string]string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", in.url+"/tools/"+tool+"/execute", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", callerParent)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := in.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env
	}
	checkReached := func(what, tp string) {
		t.Helper()
		if traceOf(tp) != callerTrace || strings.Contains(tp, callerSpan) {
			t.Errorf("%s got traceparent %q: want the caller's trace %s under a span of toold's", what, tp, callerTrace)
		}
	}

	code, env := call("api", nil)
	if code != 200 || env["trace_id"] != callerTrace {
		t.Fatalf("the HTTP API tool: %d %v", code, env)
	}
	mu.Lock()
	checkReached("the HTTP API", seen[len(seen)-1])
	mu.Unlock()

	code, env = call("peer.traceparent", nil)
	data, _ := env["data"].(map[string]any)
	if code != 200 || data == nil {
		t.Fatalf("the stdio MCP server: %d %v", code, env)
	}
	checkReached("the stdio MCP server", data["traceparent"].(string))

	code, env = call("show_trace", nil)
	data, _ = env["data"].(map[string]any)
	if code != 200 || data == nil {
		t.Fatalf("the CLI: %d %v", code, env)
	}
	checkReached("the CLI", fmt.Sprint(data["stdout"]))

	// Async: accepted now, run by a worker from the store, in the trace.
	code, env = call("api", map[string]string{"Prefer": "respond-async"})
	id, _ := env["execution_id"].(string)
	if code != 202 || id == "" {
		t.Fatalf("async: %d %v", code, env)
	}
	code, body := in.get("/executions/" + id + "?wait=10")
	var done map[string]any
	_ = json.Unmarshal(body, &done)
	if code != 200 || done["status"] != "success" || done["trace_id"] != callerTrace {
		t.Fatalf("the async execution: %d %s", code, body)
	}
	mu.Lock()
	checkReached("the HTTP API from the async worker", seen[len(seen)-1])
	mu.Unlock()

	// A call without trace context starts its own trace; the spans went
	// to the OTLP endpoint the standard variable named.
	req, _ := http.NewRequest("POST", in.url+"/tools/api/execute", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := in.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if tid, _ := env["trace_id"].(string); len(tid) != 32 || tid == callerTrace {
		t.Errorf("a call without traceparent: trace_id %v", env["trace_id"])
	}
	if err := in.shutdown(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for exports.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if exports.Load() == 0 {
		t.Error("toold exported no spans to OTEL_EXPORTER_OTLP_ENDPOINT (not even at shutdown)")
	}
}

// jaeger finds the Jaeger binary .ci/run builds from test/jaeger: the
// TOOLD_JAEGER variable, or jaeger on PATH. Without one the test skips,
// unless TOOLD_REQUIRE_JAEGER=1 (as .ci/run sets) makes that a failure.
func jaeger(t *testing.T) string {
	t.Helper()
	return testpeer.Binary(t, "TOOLD_JAEGER", "jaeger", "TOOLD_REQUIRE_JAEGER",
		"no Jaeger collector to export to. Build it with "+
			"`(cd test/jaeger && go build -o \"$(go env GOPATH)/bin/jaeger\" github.com/jaegertracing/jaeger/cmd/jaeger)` "+
			"(as .ci/run does), or set TOOLD_JAEGER to its path")
}

// TestTracesReachACollector: toold, configured only by the standard OTEL_*
// variables, exports a call's spans over OTLP/HTTP to a real OpenTelemetry
// Collector (Jaeger v2, its in-memory store) on loopback, and the trace
// the envelope names is there, whole: the server span, execute_tool with
// its attributes, and the phases.
func TestTracesReachACollector(t *testing.T) {
	bin := jaeger(t)
	dir := t.TempDir()
	otlp, query, grpc := statetest.FreePort(t), statetest.FreePort(t), statetest.FreePort(t)
	conf := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], exporters: [jaeger_storage_exporter]}
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:%d"}
extensions:
  jaeger_storage:
    backends: {mem: {memory: {max_traces: 1000}}}
  jaeger_query:
    storage: {traces: mem}
    grpc: {endpoint: "127.0.0.1:%d"}
    http: {endpoint: "127.0.0.1:%d"}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
`, otlp, grpc, query)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config", "file:"+conf)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	queryURL := fmt.Sprintf("http://127.0.0.1:%d", query)
	waitHTTP(t, queryURL+"/api/services", &out)

	in := start(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": fmt.Sprintf("http://127.0.0.1:%d", otlp),
		"OTEL_SERVICE_NAME": "toold-e2e"}, "-config", echoConfig(t), "-workspace", workspace(t))
	code, env := in.exec("echo", `{"message":"to the collector"}`)
	id, _ := env["trace_id"].(string)
	if code != 200 || len(id) != 32 {
		t.Fatalf("%d %v", code, env)
	}
	// The batch exporter sends within seconds; shutting down flushes it.
	if err := in.shutdown(); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Data []struct {
			Spans []struct {
				OperationName string `json:"operationName"`
				Tags          []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(queryURL + "/api/traces/" + id)
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
		}
		if len(got.Data) == 1 && len(got.Data[0].Spans) >= 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s not in the collector: %+v\n%s", id, got, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ops := map[string]map[string]any{}
	for _, s := range got.Data[0].Spans {
		tags := map[string]any{}
		for _, tag := range s.Tags {
			tags[tag.Key] = tag.Value
		}
		ops[s.OperationName] = tags
	}
	for _, want := range []string{"POST /tools/{name}/execute", "execute_tool echo", "validate", "sanitize", "queue", "execute"} {
		if ops[want] == nil {
			t.Errorf("the collector has no span %q (has %v)", want, keysOf(ops))
		}
	}
	if tags := ops["execute_tool echo"]; tags["gen_ai.tool.name"] != "echo" || tags["gen_ai.operation.name"] != "execute_tool" {
		t.Errorf("execute_tool's attributes in the collector: %v", tags)
	}
	for _, p := range got.Data[0].Processes {
		if p.ServiceName != "toold-e2e" {
			t.Errorf("service name %q, want OTEL_SERVICE_NAME's", p.ServiceName)
		}
	}
}

func echoConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "echo.yaml")
	if err := os.WriteFile(p, []byte("tools: {echo: {enabled: true}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitHTTP(t *testing.T, url string, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer: %v\n%s", url, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func keysOf(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
