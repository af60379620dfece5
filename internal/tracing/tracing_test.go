package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestResolve: the configuration and the OTEL_* variables, the variables
// winning, and every bad value refused with what to write instead.
func TestResolve(t *testing.T) {
	half := 0.5
	tests := []struct {
		name    string
		cfg     Config
		env     map[string]string
		enabled bool
		want    string // endpoint, sampler, service
		err     string
	}{
		{name: "off by default", enabled: false, want: " parentbased_always_on toold"},
		{name: "config on", cfg: Config{Enabled: true, Endpoint: "http://c:4318/"}, enabled: true,
			want: "http://c:4318/v1/traces parentbased_always_on toold"},
		{name: "on, default endpoint", cfg: Config{Enabled: true}, enabled: true,
			want: "http://localhost:4318/v1/traces parentbased_always_on toold"},
		{name: "the endpoint variable turns it on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example:4318"},
			enabled: true, want: "https://otel.example:4318/v1/traces parentbased_always_on toold"},
		{name: "the traces endpoint is used as it is", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/x"},
			enabled: true, want: "http://c:9/x parentbased_always_on toold"},
		{name: "variables win", cfg: Config{Enabled: true, Endpoint: "http://file:4318", Sampler: "always_off", ServiceName: "a"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_TRACES_SAMPLER": "traceidratio",
				"OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SERVICE_NAME": "b"},
			enabled: true, want: "http://env:4318/v1/traces traceidratio 0.25 b"},
		{name: "config ratio", cfg: Config{Enabled: true, Sampler: "parentbased_traceidratio", SamplerArg: &half}, enabled: true,
			want: "http://localhost:4318/v1/traces parentbased_traceidratio 0.5 toold"},
		{name: "OTEL_SDK_DISABLED", cfg: Config{Enabled: true}, env: map[string]string{"OTEL_SDK_DISABLED": "true"},
			want: " parentbased_always_on toold"},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
			want: "http://c:4318/v1/traces parentbased_always_on toold"},
		{name: "exporter zipkin", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTLP only"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "http/protobuf"},
		{name: "bad sampler", cfg: Config{Sampler: "sometimes"}, err: "always_on, always_off"},
		{name: "bad ratio", env: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "2"}, err: "ratio from 0 to 1"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, err: "milliseconds"},
		{name: "bad headers", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, err: "key=value"},
		{name: "bad endpoint", cfg: Config{Enabled: true, Endpoint: "collector:4318"}, err: "http(s) URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := resolve(tc.cfg, envOf(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := r.endpoint + " " + r.samplerName + " " + r.service
			if r.enabled != tc.enabled || got != tc.want {
				t.Errorf("enabled %v %q, want %v %q", r.enabled, got, tc.enabled, tc.want)
			}
		})
	}
}

func TestHeadersAndTimeout(t *testing.T) {
	r, err := resolve(Config{}, envOf(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x=1",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.headers["api-key"] != "a b" || r.headers["x"] != "1" || r.timeout != 2500*time.Millisecond {
		t.Errorf("headers %v timeout %v", r.headers, r.timeout)
	}
}

// TestOffIsNil: tracing off is a nil *Tracing whose methods are safe.
func TestOffIsNil(t *testing.T) {
	tr, err := Setup(context.Background(), Config{}, envOf(nil), Options{})
	if err != nil || tr != nil {
		t.Fatalf("%v %v", tr, err)
	}
	if tr.Tracer() != nil || tr.String() != "off" || tr.Shutdown(context.Background()) != nil {
		t.Error("a nil Tracing misbehaves")
	}
}

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestCarriers: a span context survives every way toold carries it —
// headers, MCP _meta, a store record, a process's environment — without
// the caller's tracestate, and nothing is written where there is none.
func TestCarriers(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", parent)
	h.Set("tracestate", "vendor=1")
	ctx := FromHeader(context.Background(), h)
	if id, sampled := TraceID(ctx); id != "4bf92f3577b34da6a3ce929d0e0e4736" || !sampled {
		t.Fatalf("from headers: %q %v", id, sampled)
	}
	out := http.Header{}
	ToHeader(ctx, out)
	meta := map[string]any{}
	ToMeta(ctx, meta)
	c := FromContext(ctx)
	env := Env(ctx)
	// The caller's tracestate is dropped where it enters (issue 24).
	if out.Get("traceparent") != parent || meta["traceparent"] != parent || c[TraceParent] != parent ||
		len(env) != 1 || env[0] != "TRACEPARENT="+parent || out.Get("tracestate") != "" || len(meta) != 1 || len(c) != 1 {
		t.Errorf("out: header %v meta %v carrier %v env %v", out, meta, c, env)
	}
	back := FromMeta(context.Background(), map[string]any{"traceparent": parent, "tracestate": "vendor=1"})
	if sc := trace.SpanContextFromContext(back); !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Errorf("through _meta: %v, tracestate %q", sc.IsValid(), sc.TraceState())
	}
	if id, _ := TraceID(c.Context(context.Background())); id != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Error("the carrier lost the trace")
	}
	none := context.Background()
	empty := http.Header{}
	ToHeader(none, empty)
	if len(empty) != 0 || FromContext(none) != nil || Env(none) != nil || LogFields(none) != nil {
		t.Error("something was carried without a span context")
	}
	if len(LogFields(ctx)) != 2 {
		t.Error("log fields missing")
	}
}

// TestBadParents: malformed trace context is ignored, never half-used.
func TestBadParents(t *testing.T) {
	for _, tp := range []string{"", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		if ValidParent(tp) {
			t.Errorf("%q honoured", tp)
		}
		if id, _ := TraceID(FromMeta(context.Background(), map[string]any{"traceparent": tp})); id != "" {
			t.Errorf("%q from _meta gave trace %s", tp, id)
		}
	}
	if id, _ := TraceID(FromMeta(context.Background(), map[string]any{"traceparent": 42})); id != "" {
		t.Error("a number in _meta was read")
	}
}

// FuzzTraceContext: whatever a caller sends as trace context, toold either
// ignores it or carries exactly one well-formed span context on.
func FuzzTraceContext(f *testing.F) {
	f.Add(parent, "vendor=1")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")
	f.Add("zz", "a=b,c=d")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		ctx := FromMeta(context.Background(), map[string]any{"traceparent": tp, "tracestate": ts})
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			if FromContext(ctx) != nil {
				t.Fatal("carried an invalid context")
			}
			return
		}
		c := FromContext(ctx)
		again := trace.SpanContextFromContext(c.Context(context.Background()))
		if !again.Equal(sc.WithRemote(true)) && !again.Equal(sc) {
			t.Fatalf("round trip changed %v into %v", sc, again)
		}
		for _, v := range Env(ctx) {
			if strings.ContainsAny(v, "\n\x00") {
				t.Fatalf("an environment entry holds a control character: %q", v)
			}
		}
	})
}
