package server

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/tracing"
)

// startSpan opens the request's server span, a child of the caller's
// span when the request carries a W3C traceparent. Its name and route are
// set when it ends: chi knows the route pattern only after routing.
func (s *Server) startSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	ctx = tracing.FromHeader(ctx, r.Header)
	return s.opts.Tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLScheme(scheme(r)),
			semconv.NetworkProtocolVersion(protoVersion(r))))
}

// probe tells a health probe (/healthz, /readyz) from a request: a
// kubelet or a load balancer asks every few seconds, and a trace each
// would bury the calls under traces of nothing. Probes are still counted
// and logged.
func probe(r *http.Request) bool {
	return r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
}

// endSpan closes the server span with the HTTP conventions' attributes:
// the route (never the raw path: it may carry what a caller typed), the
// status (5xx marks the span failed, as the conventions say for a server),
// and toold's outcome of the call it answered.
func endSpan(span trace.Span, method, route string, status int, tool, outcome string) {
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
	if tool != "" {
		span.SetAttributes(tracing.GenAIToolName.String(tool))
	}
	if outcome != "" {
		span.SetAttributes(tracing.ToolStatus.String(outcome))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func protoVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1.1"
}
