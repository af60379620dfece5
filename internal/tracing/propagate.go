package tracing

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// TraceParent is the W3C trace context field toold carries, as HTTP
// headers, MCP _meta keys and record fields name it.
const TraceParent = "traceparent"

// FromHeader returns ctx with the remote span context of a request's
// traceparent header, when it is well-formed; tracestate is not read.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// ToHeader writes ctx's span context into h, when it has a valid one.
func ToHeader(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Carrier is a span context in a map: how an execution's record in the
// state store carries its caller's trace to the replica that runs it.
type Carrier map[string]string

// FromContext returns ctx's span context as a Carrier, or nil when ctx
// has none.
func FromContext(ctx context.Context) Carrier {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := Carrier{}
	propagator.Inject(ctx, propagation.MapCarrier(c))
	return c
}

// Context returns ctx with the carrier's span context as its remote parent.
func (c Carrier) Context(ctx context.Context) context.Context {
	if len(c) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(c))
}

// FromMeta returns ctx with the span context an MCP request carries in its
// _meta (the traceparent key, as MCP's OpenTelemetry conventions place
// it; tracestate is not read). A value that is not a string is ignored.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta[TraceParent].(string)
	if tp == "" {
		return ctx
	}
	return Carrier{TraceParent: tp}.Context(ctx)
}

// ToMeta writes ctx's span context into an MCP request's _meta.
func ToMeta(ctx context.Context, meta map[string]any) {
	for k, v := range FromContext(ctx) {
		meta[k] = v
	}
}

// Env returns ctx's span context as an environment variable for a process
// toold starts: TRACEPARENT, the name OpenTelemetry's environment-carrier
// specification gives it. Nil without one.
func Env(ctx context.Context) []string {
	c := FromContext(ctx)
	if c == nil {
		return nil
	}
	return []string{"TRACEPARENT=" + c[TraceParent]}
}

// parentOnly is W3C trace context without tracestate. A caller's
// tracestate is its vendors' data — opaque, up to 512 characters of
// anything — and toold has none of its own to add: carried, it went
// verbatim to toold's collector on every span and to every API, MCP server
// and CLI a tool reaches, which is why baggage is not carried either. So
// it is dropped where it enters (never parsed, kept or stored) and never
// written: the trace joins through traceparent alone.
type parentOnly struct{}

func (parentOnly) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	propagation.TraceContext{}.Inject(ctx, parentCarrier{c})
}

func (parentOnly) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	return propagation.TraceContext{}.Extract(ctx, parentCarrier{c})
}

func (parentOnly) Fields() []string { return []string{TraceParent} }

// parentCarrier passes traceparent through and nothing else.
type parentCarrier struct{ propagation.TextMapCarrier }

func (p parentCarrier) Get(key string) string {
	if key != TraceParent {
		return ""
	}
	return p.TextMapCarrier.Get(key)
}

func (p parentCarrier) Set(key, value string) {
	if key == TraceParent {
		p.TextMapCarrier.Set(key, value)
	}
}

// TraceID returns ctx's trace id in hex, and whether its span is sampled;
// "" when ctx has no span context.
func TraceID(ctx context.Context) (id string, sampled bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", false
	}
	return sc.TraceID().String(), sc.IsSampled()
}

// LogFields are the trace_id and span_id fields of a log line about the
// work ctx belongs to; none when ctx has no span context.
func LogFields(ctx context.Context) []zap.Field {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []zap.Field{zap.String("trace_id", sc.TraceID().String()), zap.String("span_id", sc.SpanID().String())}
}

// ValidParent reports whether s is a traceparent toold would honour: the
// W3C format (version-traceid-spanid-flags, lower-case hex, ids not all
// zero). Anything else is ignored, as the W3C specification requires.
func ValidParent(s string) bool {
	c := Carrier{TraceParent: strings.TrimSpace(s)}
	return trace.SpanContextFromContext(c.Context(context.Background())).IsValid()
}

// StartClient opens a client span for a call toold makes to the outside
// (an HTTP API, an upstream MCP server, a process), a child of ctx's span
// and made by that span's own tracer provider: a tool needs no tracer of
// its own. When ctx has no span — tracing is off — it returns ctx and a
// nil span at once, and End(nil, ...) does nothing.
func StartClient(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
}

// End closes a span from StartClient; failed marks it an error, with
// error.type errType when one is given.
func End(span trace.Span, failed bool, errType string, attrs ...attribute.KeyValue) {
	if span == nil {
		return
	}
	if failed {
		span.SetStatus(codes.Error, "")
		if errType != "" {
			attrs = append(attrs, attribute.String("error.type", errType))
		}
	}
	span.SetAttributes(attrs...)
	span.End()
}
