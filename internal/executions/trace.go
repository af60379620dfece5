package executions

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tracing"
)

// startRun opens the span of one run of an execution on this replica: a
// consumer of the work queue, in the trace of the request that made the
// execution (its record carries that span context), so the calls it runs
// are children of the caller's span even on another replica, and long
// after the request ended. Without a tracer ctx is returned unchanged.
func (s *Service) startRun(ctx context.Context, r *Record) (context.Context, trace.Span) {
	if s.opts.Tracer == nil {
		return ctx, nil
	}
	return s.opts.Tracer.Start(r.Trace.Context(ctx), "execution "+r.Kind, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.ExecutionID.String(r.ID), tracing.GenAIToolName.String(r.Tool),
			tracing.Replica.String(s.name), tracing.Step.Int(r.Step), tracing.Attempt.Int(r.Attempt)))
}

func endRun(span trace.Span, env *dispatch.Envelope) {
	if span == nil {
		return
	}
	span.SetAttributes(tracing.ToolStatus.String(string(env.Status)))
	if env.Error != nil {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}
