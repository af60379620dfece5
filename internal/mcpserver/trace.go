package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/tracing"
)

// startSpan opens a tools/call's span as MCP's OpenTelemetry conventions
// name it ("tools/call {tool}", kind server). Its parent is the span
// context the client put in _meta (traceparent) when there is
// one — the agent's own trace — and the HTTP request's span otherwise; a
// call with both links the HTTP span.
func (s *Server) startSpan(ctx context.Context, req *mcp.CallToolRequest, name string) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.MCPMethodName.String("tools/call"), tracing.GenAIToolName.String(name),
			tracing.GenAIOperationName.String(tracing.ExecuteToolValue))}
	if id := rpcID(ctx); id != "" {
		opts = append(opts, trace.WithAttributes(tracing.JSONRPCRequestID.String(id)))
	}
	version := protocolVersion(ctx) // a fast-path call's
	if req.Session != nil {
		if ir := req.Session.InitializeParams(); ir != nil {
			version = ir.ProtocolVersion
		}
	}
	if version != "" {
		opts = append(opts, trace.WithAttributes(tracing.MCPProtocolVersion.String(version)))
	}
	if meta := req.Params.GetMeta(); meta != nil {
		if remote := tracing.FromMeta(context.Background(), meta); trace.SpanContextFromContext(remote).IsValid() {
			if http := trace.SpanContextFromContext(ctx); http.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: http}))
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.SpanContextFromContext(remote))
		}
	}
	return s.opts.Tracer.Start(ctx, "tools/call "+name, opts...)
}

const errorType = attribute.Key("error.type")

// endSpan closes it: a protocol error or a tool result with isError marks
// the span failed (error.type tool_error, as the conventions say).
func endSpan(span trace.Span, res *mcp.CallToolResult, err error) {
	switch {
	case err != nil:
		span.SetStatus(codes.Error, "")
		span.SetAttributes(errorType.String("jsonrpc_error"))
	case res != nil && res.IsError:
		span.SetStatus(codes.Error, "")
		span.SetAttributes(errorType.String("tool_error"))
	}
	span.End()
}
