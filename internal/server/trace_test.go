package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tracing"
	"github.com/toold/toold/internal/tracing/tracingtest"
)

// The caller's span: every trace below joins it.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// TestSpanTrees holds the span tree of each REST transport: the request's
// server span under the caller's, one execute_tool span per call under it,
// and the pipeline's phases under that — the envelope's timing as spans.
func TestSpanTrees(t *testing.T) {
	rec := tracingtest.New(t, nil)
	h := newHarness(t, harnessOpts{store: true, tracer: rec.Tracer()})
	okCall := "execute_tool echo (internal)\n" +
		"    validate (internal)\n    sanitize (internal)\n    queue (internal)\n    execute (internal)\n    sanitize (internal)\n"
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		header map[string]string
		await  string // the spans to wait for
		more   []string
		want   string
	}{
		{name: "sync", method: "POST", path: "/tools/echo/execute", body: `{"message":"hi"}`,
			await: "POST /tools/{name}/execute",
			want:  "POST /tools/{name}/execute (server)\n  " + okCall},
		{name: "stream", method: "POST", path: "/tools/echo/execute", body: `{"message":"hi"}`,
			header: map[string]string{"Accept": "text/event-stream"}, await: "POST /tools/{name}/execute",
			want: "POST /tools/{name}/execute (server)\n  " + okCall},
		{name: "refused by validation", method: "POST", path: "/tools/echo/execute", body: `{"message":7}`,
			await: "POST /tools/{name}/execute",
			want: "POST /tools/{name}/execute (server)\n" +
				"  execute_tool echo (internal) error\n    validate (internal) error\n"},
		{name: "batch", method: "POST", path: "/batch", await: "POST /batch",
			body: `{"max_parallel":1,"calls":[{"tool":"echo","arguments":{"message":"a"}},{"tool":"echo","arguments":{"message":"b"}}]}`,
			want: "POST /batch (server)\n  " + okCall + "  " + okCall},
		{name: "async", method: "POST", path: "/executions", body: `{"tool":"echo","arguments":{"message":"hi"}}`,
			await: "POST /executions", more: []string{"execution call"},
			want: "POST /executions (server)\n" +
				"  execution call (consumer)\n    " + strings.ReplaceAll(okCall, "\n    ", "\n      ")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			hdr := map[string]string{"traceparent": callerParent}
			for k, v := range tc.header {
				hdr[k] = v
			}
			r := h.do(tc.method, tc.path, []byte(tc.body), hdr)
			if r.status >= 500 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			rec.Await(t, tc.await, tc.more...)
			id, _ := trace.TraceIDFromHex(callerTrace)
			if diff := cmp.Diff(tc.want, rec.Tree(id)); diff != "" {
				t.Errorf("span tree (-want +got):\n%s", diff)
			}
			for _, s := range rec.Spans() {
				if strings.HasPrefix(s.Name, "POST ") && s.Parent.SpanID().String() != callerSpan {
					t.Errorf("the server span's parent is %s, not the caller's span %s", s.Parent.SpanID(), callerSpan)
				}
			}
			if strings.Contains(r.header.Get("Content-Type"), "json") && r.env.TraceID != "" && r.env.TraceID != callerTrace {
				t.Errorf("envelope trace_id %q, want the caller's %q", r.env.TraceID, callerTrace)
			}
		})
	}
}

// TestCallSpanAttributes: the execute_tool span carries the generative-AI
// conventions' attributes and the outcome, and never the arguments or the
// result unless the operator asked (see dispatch's payload test).
func TestCallSpanAttributes(t *testing.T) {
	rec := tracingtest.New(t, nil)
	h := newHarness(t, harnessOpts{tracer: rec.Tracer()})
	r := h.exec("echo", `{"message":"top secret ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`, map[string]string{"X-Request-ID": "req-42"})
	if r.status != 200 || len(r.env.TraceID) != 32 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	s := rec.Await(t, "execute_tool echo")
	for key, want := range map[string]string{
		string(tracing.GenAIOperationName): "execute_tool", string(tracing.GenAIToolName): "echo",
		string(tracing.GenAIToolCallID): "req-42", string(tracing.ToolStatus): "success",
		string(tracing.ToolCategory): "direct",
	} {
		if got := tracingtest.Attr(s, attributeKey(key)); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if s.SpanContext.TraceID().String() != r.env.TraceID {
		t.Errorf("span trace %s, envelope trace_id %s", s.SpanContext.TraceID(), r.env.TraceID)
	}
	for _, sp := range rec.Spans() {
		for _, kv := range sp.Attributes {
			if strings.Contains(kv.Value.Emit(), "ghp_") || strings.Contains(kv.Value.Emit(), "top secret") {
				t.Errorf("span %q carries the arguments or result in %s", sp.Name, kv.Key)
			}
		}
	}
	// The access log line names the trace, so a log search finds it.
	var found bool
	for _, e := range h.logs.FilterMessage("request").All() {
		if e.ContextMap()["trace_id"] == r.env.TraceID {
			found = true
		}
	}
	if !found {
		t.Errorf("no access log line carries trace_id %s", r.env.TraceID)
	}
}

// TestTracingOff: without a tracer no envelope carries a trace_id and a
// caller's traceparent changes nothing.
func TestTracingOff(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.exec("echo", `{"message":"hi"}`, map[string]string{"traceparent": callerParent})
	if r.status != 200 || r.env.TraceID != "" || strings.Contains(string(r.body), "trace_id") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r.env.Status != dispatch.StatusSuccess {
		t.Fatal(r.env.Status)
	}
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }

// TestProbesMakeNoSpans: /healthz and /readyz, asked every few seconds by
// a kubelet or a load balancer, make no trace (even when the probe
// carries a traceparent); the request after them does.
func TestProbesMakeNoSpans(t *testing.T) {
	rec := tracingtest.New(t, nil)
	h := newHarness(t, harnessOpts{tracer: rec.Tracer()})
	for _, path := range []string{"/healthz", "/readyz", "/healthz"} {
		if r := h.do("GET", path, nil, map[string]string{"traceparent": callerParent}); r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	h.do("GET", "/tools", nil, nil)
	rec.Await(t, "GET /tools")
	for _, s := range rec.Spans() {
		if s.Name != "GET /tools" {
			t.Errorf("a span %q besides the request's", s.Name)
		}
	}
}
