package tracing

import "go.opentelemetry.io/otel/attribute"

// Attribute keys of the OpenTelemetry semantic conventions for generative
// AI (gen_ai.*) and MCP (mcp.*), written out here: the semconv packages of
// the Go SDK move them between versions while they are in development, and
// these names are what tracing backends group tool calls by.
const (
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	GenAIToolName      = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID    = attribute.Key("gen_ai.tool.call.id")
	GenAIToolType      = attribute.Key("gen_ai.tool.type")
	GenAIToolDesc      = attribute.Key("gen_ai.tool.description")
	// GenAIToolArguments and GenAIToolResult are opt-in: set only for a
	// tool whose operator turned payloads on, and only after sanitization.
	GenAIToolArguments = attribute.Key("gen_ai.tool.call.arguments")
	GenAIToolResult    = attribute.Key("gen_ai.tool.call.result")

	MCPMethodName      = attribute.Key("mcp.method.name")
	MCPProtocolVersion = attribute.Key("mcp.protocol.version")
	JSONRPCRequestID   = attribute.Key("jsonrpc.request.id")

	// toold's own, under its namespace.
	ToolCategory     = attribute.Key("toold.tool.category")
	ToolStatus       = attribute.Key("toold.status")
	Caller           = attribute.Key("toold.caller")
	ExecutionID      = attribute.Key("toold.execution.id")
	Redactions       = attribute.Key("toold.sanitize.redactions")
	Truncated        = attribute.Key("toold.sanitize.truncated")
	SanitizeStage    = attribute.Key("toold.sanitize.stage")
	Replica          = attribute.Key("toold.replica")
	Step             = attribute.Key("toold.execution.step")
	Attempt          = attribute.Key("toold.execution.attempt")
	UpstreamServer   = attribute.Key("toold.upstream.server")
	ExecuteToolValue = "execute_tool"

	// Who a call is for (see auth.Identity): the kind of principal, and
	// for a token its subject (the OpenTelemetry user.id), issuer, acting
	// client and delegating actor.
	PrincipalKind   = attribute.Key("toold.principal.kind")
	UserID          = attribute.Key("user.id")
	PrincipalIssuer = attribute.Key("toold.principal.issuer")
	PrincipalClient = attribute.Key("toold.principal.client")
	PrincipalActor  = attribute.Key("toold.principal.actor")
)

// PrincipalAttributes are a call's principal as span attributes; empty
// parts are left out.
func PrincipalAttributes(kind, subject, issuer, client, actor string) []attribute.KeyValue {
	out := []attribute.KeyValue{PrincipalKind.String(kind)}
	for _, kv := range []attribute.KeyValue{UserID.String(subject), PrincipalIssuer.String(issuer),
		PrincipalClient.String(client), PrincipalActor.String(actor)} {
		if kv.Value.AsString() != "" {
			out = append(out, kv)
		}
	}
	return out
}
