package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/tracing"
	"github.com/toold/toold/internal/tracing/tracingtest"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// echoTree is a successful call to echo as spans, below its transport's.
const echoTree = "  execute_tool echo (internal)\n" +
	"    validate (internal)\n    sanitize (internal)\n    queue (internal)\n    execute (internal)\n    sanitize (internal)\n"

// TestMCPSpanTrees: a tools/call is a server span as MCP's conventions name
// it, under the span the client put in _meta (every protocol version,
// HTTP and stdio), with the pipeline's spans under it.
func TestMCPSpanTrees(t *testing.T) {
	rec := tracingtest.New(t, nil)
	h := newHarness(t, harnessOpts{tracer: rec.Tracer()})
	id, _ := trace.TraceIDFromHex(callerTrace)
	want := "tools/call echo (server)\n" + echoTree
	for _, v := range versions {
		t.Run("http "+v, func(t *testing.T) {
			rec.Reset()
			cs := h.client(v, "", nil)
			res, err := callTool(t, cs, "echo", map[string]any{"message": "hi"}, mcp.Meta{"traceparent": callerParent})
			if err != nil || res.IsError {
				t.Fatalf("%v %s", err, text(res))
			}
			span := rec.Await(t, "tools/call echo")
			if diff := cmp.Diff(want, rec.Tree(id)); diff != "" {
				t.Errorf("span tree (-want +got):\n%s", diff)
			}
			if span.Parent.SpanID().String() != callerSpan || len(span.Links) != 1 {
				t.Errorf("tools/call's parent %s (want the caller's %s), links %d (want the HTTP request's)",
					span.Parent.SpanID(), callerSpan, len(span.Links))
			}
			if got := tracingtest.Attr(span, tracing.MCPProtocolVersion); v != "2026-07-28" && got != v {
				t.Errorf("mcp.protocol.version %q, want %q", got, v)
			}
			env, _ := res.Meta["toold/envelope"].(map[string]any)
			if env["trace_id"] != callerTrace {
				t.Errorf("the envelope in _meta has trace_id %v, want the caller's", env["trace_id"])
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		rec.Reset()
		cs := h.stdio(nil)
		res, err := callTool(t, cs, "echo", map[string]any{"message": "hi"}, mcp.Meta{"traceparent": callerParent})
		if err != nil || res.IsError {
			t.Fatalf("%v %s", err, text(res))
		}
		rec.Await(t, "tools/call echo")
		if diff := cmp.Diff(want, rec.Tree(id)); diff != "" {
			t.Errorf("span tree (-want +got):\n%s", diff)
		}
	})
	t.Run("no _meta: under the HTTP request", func(t *testing.T) {
		rec.Reset()
		cs := h.client("2025-06-18", "", nil)
		if res, err := callTool(t, cs, "echo", map[string]any{"message": "hi"}, nil); err != nil || res.IsError {
			t.Fatalf("%v %s", err, text(res))
		}
		// The call's own POST span ends after the tool's, once the answer
		// is written; a POST /mcp that ended already may be the
		// connection's initialize. Wait for the tree to be whole.
		span := rec.Await(t, "tools/call echo")
		const want = "POST /mcp (server)\n  tools/call echo (server)\n    execute_tool echo (internal)\n"
		var got string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if got = rec.Tree(span.SpanContext.TraceID()); strings.HasPrefix(got, want) {
				break
			}
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("span tree:\n%s", got)
		}
	})
	t.Run("a bad traceparent is ignored", func(t *testing.T) {
		rec.Reset()
		cs := h.client("2025-06-18", "", nil)
		res, err := callTool(t, cs, "echo", map[string]any{"message": "hi"}, mcp.Meta{"traceparent": "00-zz-" + callerSpan + "-01"})
		if err != nil || res.IsError {
			t.Fatalf("%v %s", err, text(res))
		}
		if span := rec.Await(t, "tools/call echo"); span.Parent.SpanID().String() == callerSpan || !span.Parent.IsValid() {
			t.Errorf("a malformed traceparent was honoured, or the HTTP span lost: parent %s", span.Parent.SpanID())
		}
	})
}

// TestResumedStepJoinsTheTrace: a call that paused is resumed later, over
// REST, by someone sending no trace context; the step the worker runs is
// still in the trace of the client that made the call.
func TestResumedStepJoinsTheTrace(t *testing.T) {
	rec := tracingtest.New(t, nil)
	h := newHarness(t, harnessOpts{store: true, tracer: rec.Tracer()})
	cs := h.client("2025-06-18", "", nil)
	res, err := callTool(t, cs, "request_user_input", map[string]any{"prompt": "Which colour?"}, mcp.Meta{"traceparent": callerParent})
	w, _ := res.Meta["toold/waiting"].(map[string]any)
	if err != nil || w == nil {
		t.Fatalf("%v %s", err, text(res))
	}
	resume, _ := w["resume"].(string)
	req, _ := http.NewRequest("POST", h.url+resume, strings.NewReader(`{"answer":"green"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "wait=10")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"trace_id":"`+callerTrace+`"`) {
		t.Errorf("the resumed execution's envelope is not in the caller's trace: %s", body)
	}
	run := rec.Await(t, "execution call")
	if run.SpanContext.TraceID().String() != callerTrace || run.Parent.SpanID().String() == callerSpan {
		t.Errorf("the resumed step's run: trace %s parent %s; want the caller's trace, under the tools/call span",
			run.SpanContext.TraceID(), run.Parent.SpanID())
	}
}
