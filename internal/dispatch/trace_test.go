package dispatch

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/diag"
	"github.com/toold/toold/internal/tracing"
	"github.com/toold/toold/internal/tracing/tracingtest"
)

func tracedDispatcher(tb testing.TB, o Options, ts ...tools.Tool) *Dispatcher {
	tb.Helper()
	reg, err := registry.New(registry.Options{}, ts...)
	if err != nil {
		tb.Fatal(err)
	}
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	o.Registry, o.Sanitizer, o.Limiter = registry.NewLive(reg, registry.Options{}), san, limits.New(limits.Options{})
	d, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// TestTracePayloads: a span carries a call's arguments and result only for
// a tool the operator named, and then redacted as the debug log is: a
// tracing backend never sees a secret.
func TestTracePayloads(t *testing.T) {
	const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	body := []byte(`{"message":"token ` + secret + `"}`)
	for _, on := range []bool{false, true} {
		rec := tracingtest.New(t, nil)
		d := tracedDispatcher(t, Options{Tracer: rec.Tracer(), TracePayloads: func(tool string) bool { return on && tool == "echo" }},
			diag.Echo())
		env := d.Execute(context.Background(), &Request{Tool: "echo", Body: body, RequestID: "r"})
		if !env.Success || env.TraceID == "" || !env.TraceSampled {
			t.Fatalf("%+v", env)
		}
		s := rec.Await(t, "execute_tool echo")
		args, result := tracingtest.Attr(s, tracing.GenAIToolArguments), tracingtest.Attr(s, tracing.GenAIToolResult)
		if !on {
			if args != "" || result != "" {
				t.Errorf("payloads on a span without trace_payloads: %q %q", args, result)
			}
			continue
		}
		if !strings.Contains(args, "token") || !strings.Contains(result, "token") {
			t.Errorf("trace_payloads: arguments %q result %q", args, result)
		}
		if strings.Contains(args+result, secret) {
			t.Errorf("a secret reached a span: %q %q", args, result)
		}
	}
}

// TestSampledOut: a call that is not sampled still has a trace id (the
// caller can correlate) but records nothing and sets no exemplar.
func TestSampledOut(t *testing.T) {
	rec := tracingtest.New(t, map[string]string{"OTEL_TRACES_SAMPLER": "always_off"})
	d := tracedDispatcher(t, Options{Tracer: rec.Tracer()}, noop{})
	env := d.Execute(context.Background(), &Request{Tool: "noop", Body: []byte(`{}`), RequestID: "r"})
	if !env.Success || len(env.TraceID) != 32 || env.TraceSampled || len(rec.Spans()) != 0 {
		t.Fatalf("%+v, %d spans", env, len(rec.Spans()))
	}
}

// BenchmarkDispatchTracing is BenchmarkDispatch's call with tracing off
// (the target: unchanged), on with sampling 0 (spans made, none recorded)
// and on at 100% (every span recorded and exported, in batches, to an
// exporter that drops them: the SDK's cost, not a collector's).
func BenchmarkDispatchTracing(b *testing.B) {
	body := []byte(`{"x":"hello"}`)
	for _, bc := range []struct {
		name    string
		sampler string
	}{{"off", ""}, {"sampled_0", "always_off"}, {"sampled_100", "always_on"}} {
		b.Run(bc.name, func(b *testing.B) {
			o := Options{}
			if bc.sampler != "" {
				t, err := tracing.Setup(context.Background(), tracing.Config{Sampler: bc.sampler},
					func(string) (string, bool) { return "", false }, tracing.Options{Exporter: tracetest.NewNoopExporter()})
				if err != nil {
					b.Fatal(err)
				}
				defer t.Shutdown(context.Background())
				o.Tracer = t.Tracer()
			}
			d := tracedDispatcher(b, o, noop{})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if env := d.Execute(ctx, &Request{Tool: "noop", Body: body, RequestID: "bench"}); !env.Success {
					b.Fatal(env.Error)
				}
			}
		})
	}
}

// TestTracePrincipal: a call's span names who it was for: the caller, and
// for a token its kind, subject (user.id), issuer, client and actor.
func TestTracePrincipal(t *testing.T) {
	rec := tracingtest.New(t, nil)
	d := tracedDispatcher(t, Options{Tracer: rec.Tracer()}, diag.Echo())
	who := &auth.Identity{Kind: auth.KindToken, Name: "u-1@https://idp.test/", Issuer: "https://idp.test/", Subject: "u-1",
		Client: "agent", Actor: "backend"}
	env := d.Execute(context.Background(), &Request{Tool: "echo", Body: []byte(`{"message":"hi"}`), RequestID: "r",
		Caller: who.Name, Principal: who})
	if !env.Success || env.Principal != who {
		t.Fatalf("%+v", env)
	}
	s := rec.Await(t, "execute_tool echo")
	for key, want := range map[attribute.Key]string{tracing.Caller: who.Name, tracing.PrincipalKind: "token", tracing.UserID: "u-1",
		tracing.PrincipalIssuer: "https://idp.test/", tracing.PrincipalClient: "agent", tracing.PrincipalActor: "backend"} {
		if got := tracingtest.Attr(s, key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}

// TestSpanStatusCarriesNoArguments (issue 24, finding 7): a failed call's
// span status says the error's type and code, not its message, which
// quotes what the caller sent (here an unknown field's name); with
// trace_payloads on for the tool, the message follows.
func TestSpanStatusCarriesNoArguments(t *testing.T) {
	const field = "customer_acme_renewal_2027"
	for _, on := range []bool{false, true} {
		rec := tracingtest.New(t, nil)
		d := tracedDispatcher(t, Options{Tracer: rec.Tracer(), TracePayloads: func(string) bool { return on }}, noop{})
		env := d.Execute(context.Background(), &Request{Tool: "noop", Body: []byte(`{"` + field + `":"x"}`), RequestID: "r"})
		if env.Error == nil || !strings.Contains(env.Error.Message+fieldsText(env.Error), field) {
			t.Fatalf("the call should fail naming the field: %+v", env.Error)
		}
		s := rec.Await(t, "execute_tool noop")
		got := s.Status.Description
		if !strings.HasPrefix(got, "validation_error") {
			t.Errorf("payloads %v: the span status %q does not start with the error's type", on, got)
		}
		if strings.Contains(got, field) != on {
			t.Errorf("payloads %v: the span status is %q", on, got)
		}
	}
}

func fieldsText(e *ErrorBody) string {
	var b strings.Builder
	for _, f := range e.Fields {
		b.WriteString(f.Pointer + " " + f.Message + "\n")
	}
	return b.String()
}

// traceEcho returns the trace context a tool would pass on: the headers
// of an outgoing request and a process's environment.
type traceEcho struct{}

func (traceEcho) Spec() tools.Spec {
	return tools.Spec{Name: "trace_echo", Description: "Shows the trace context it passes on.", Category: tools.ExternalAPI,
		Parameters: []byte(`{"type":"object"}`)}
}

func (traceEcho) Execute(ctx context.Context, _ *tools.Call) (any, error) {
	h := http.Header{}
	tracing.ToHeader(ctx, h)
	meta := map[string]any{}
	tracing.ToMeta(ctx, meta)
	return map[string]any{"headers": h, "meta": meta, "env": tracing.Env(ctx)}, nil
}

// TestTraceStateIsNotCarried (issue 24, finding 7): a caller's tracestate
// reaches neither the spans toold exports nor what a tool sends on
// (headers, MCP _meta, a process's environment); the trace still joins
// through traceparent.
func TestTraceStateIsNotCarried(t *testing.T) {
	const state = "acme=t61rcWkgMzE,vendor=c2VjcmV0"
	rec := tracingtest.New(t, nil)
	d := tracedDispatcher(t, Options{Tracer: rec.Tracer()}, traceEcho{})
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set("tracestate", state)
	ctx := tracing.FromHeader(context.Background(), h)
	env := d.Execute(ctx, &Request{Tool: "trace_echo", Body: []byte(`{}`), RequestID: "r"})
	if !env.Success || env.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("%+v", env)
	}
	if out := string(env.Data); strings.Contains(out, "acme") || strings.Contains(strings.ToLower(out), "tracestate") ||
		!strings.Contains(out, "traceparent") {
		t.Errorf("the tool passes on %s", out)
	}
	rec.Await(t, "execute_tool trace_echo")
	for _, s := range rec.Spans() {
		if ts := s.SpanContext.TraceState().String() + s.Parent.TraceState().String(); ts != "" {
			t.Errorf("span %q exports tracestate %q", s.Name, ts)
		}
	}
}
