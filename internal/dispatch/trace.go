package dispatch

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/tracing"
)

// Tracing: one span per pass through the pipeline, "execute_tool {tool}"
// as OpenTelemetry's generative-AI conventions name a tool call, with a
// child span per phase the envelope's timing splits (validate, sanitize,
// queue, execute). The tool runs under the execute span, so what it calls
// (an HTTP API, an upstream MCP server, a CLI) joins the trace there.
//
// With tracing off, Options.Tracer is nil and every helper here returns at
// its first line: no span, no context, no allocation.

// startCall opens the call's span; ctx is returned unchanged when tracing
// is off.
func (d *Dispatcher) startCall(ctx context.Context, c *call) context.Context {
	if d.opts.Tracer == nil {
		return ctx
	}
	// Not resolved yet: a name no tool has is caller input, written
	// only in its redacted form.
	name := d.opts.Registry.Load().LogName(c.req.Tool)
	ctx, c.span = d.opts.Tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(tracing.GenAIOperationName.String(tracing.ExecuteToolValue),
			tracing.GenAIToolName.String(name), tracing.GenAIToolCallID.String(c.req.RequestID),
			tracing.GenAIToolType.String("function")))
	sc := c.span.SpanContext()
	c.env.TraceID, c.env.TraceSampled = sc.TraceID().String(), sc.IsSampled()
	if c.req.ExecutionID != "" {
		c.span.SetAttributes(tracing.ExecutionID.String(c.req.ExecutionID))
	}
	if c.req.Caller != "" {
		c.span.SetAttributes(tracing.Caller.String(c.req.Caller))
	}
	if id := c.req.Principal; id != nil {
		c.span.SetAttributes(tracing.PrincipalAttributes(id.Kind, id.Subject, id.Issuer, id.Client, id.Actor)...)
	}
	return ctx
}

// endCall closes the call's span with its outcome: the status, the error's
// type as error.type and the span's status (type and code), the
// sanitizer's counts, and the payloads only for a tool whose operator
// asked for them — arguments as the tool received them, the result as the
// caller got it and the error's message, all redacted.
func (d *Dispatcher) endCall(c *call) {
	s := c.span
	if s == nil {
		return
	}
	env := c.env
	attrs := []attribute.KeyValue{tracing.ToolStatus.String(string(env.Status)),
		tracing.Redactions.Int(env.Sanitized.Redactions), tracing.Truncated.Bool(env.Sanitized.Truncated)}
	payloads := c.entry != nil && c.st.TracePayloads != nil && c.st.TracePayloads(c.entry.Spec.Name)
	if c.entry != nil {
		attrs = append(attrs, tracing.ToolCategory.String(string(c.entry.Spec.Category)))
		if payloads && s.IsRecording() {
			// Through the redactor, as the debug log: a tracing backend
			// is no place for a secret, whatever the tool's policies let
			// the caller see.
			name := c.entry.Spec.Name
			if c.args != nil {
				attrs = append(attrs, tracing.GenAIToolArguments.String(string(c.st.Sanitizer.RedactJSON(name, c.args))))
			}
			if env.Data != nil {
				attrs = append(attrs, tracing.GenAIToolResult.String(string(c.st.Sanitizer.RedactJSON(name, env.Data))))
			}
		}
	}
	if env.Error != nil {
		attrs = append(attrs, attribute.String("error.type", string(env.Error.Type)))
		s.SetStatus(codes.Error, statusMessage(env.Error, payloads))
	}
	s.SetAttributes(attrs...)
	s.End()
}

// statusMessage is a failed call's span status: the error's type and
// code. An error's message quotes what the call sent (an unknown field's
// name, a path that was not found), and arguments reach a span only for
// a tool whose operator asked for payloads (trace_payloads): then the
// message, which the failure path has redacted, follows.
func statusMessage(e *ErrorBody, payloads bool) string {
	msg := string(e.Type)
	if e.Code != "" {
		msg += " (" + string(e.Code) + ")"
	}
	if payloads {
		msg += ": " + e.Message
	}
	return msg
}

// phase opens the span of one phase under the call's span; nil when the
// call has none: tracing is off, or the steps run for Check, whose calls
// are not executions (endPhase takes nil). It takes no attributes: a
// variadic argument would be built, and escape, on every call, traced or
// not.
func (d *Dispatcher) phase(ctx context.Context, c *call, name string) (context.Context, trace.Span) {
	if c.span == nil {
		return ctx, nil
	}
	return d.opts.Tracer.Start(ctx, name)
}

// sanitizePhase is the span of a sanitizer's pass, stage input or output.
func (d *Dispatcher) sanitizePhase(ctx context.Context, c *call, stage string) (context.Context, trace.Span) {
	ctx, s := d.phase(ctx, c, "sanitize")
	if s != nil {
		s.SetAttributes(tracing.SanitizeStage.String(stage))
	}
	return ctx, s
}

// endPhase closes a phase's span; err, when not nil, marks it failed.
func endPhase(s trace.Span, err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.SetStatus(codes.Error, "")
	}
	s.End()
}
