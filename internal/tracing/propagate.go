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

// The W3C trace context fields, as HTTP headers, MCP _meta keys and record
// fields name them.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// FromHeader returns ctx with the remote span context of a request's
// traceparent and tracestate headers, when they are well-formed.
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
// _meta (the traceparent and tracestate keys, as MCP's OpenTelemetry
// conventions place them). A value that is not a string is ignored.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta[TraceParent].(string)
	if tp == "" {
		return ctx
	}
	c := Carrier{TraceParent: tp}
	if ts, ok := meta[TraceState].(string); ok && ts != "" {
		c[TraceState] = ts
	}
	return c.Context(ctx)
}

// ToMeta writes ctx's span context into an MCP request's _meta.
func ToMeta(ctx context.Context, meta map[string]any) {
	for k, v := range FromContext(ctx) {
		meta[k] = v
	}
}

// Env returns ctx's span context as environment variables for a process
// toold starts: TRACEPARENT and TRACESTATE, the names OpenTelemetry's
// environment-carrier specification gives them. Nil without one.
func Env(ctx context.Context) []string {
	c := FromContext(ctx)
	if c == nil {
		return nil
	}
	env := []string{"TRACEPARENT=" + c[TraceParent]}
	if ts := c[TraceState]; ts != "" {
		env = append(env, "TRACESTATE="+ts)
	}
	return env
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
