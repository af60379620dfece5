package dispatch

import (
	"context"
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
