package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// tool is one upstream tool served by toold.
type tool struct {
	srv      *server
	upstream string // its name on the server
	spec     tools.Spec
}

var _ tools.Tool = (*tool)(nil)

// newTool describes an upstream tool in toold's terms. Its schemas are
// passed on as the server wrote them; the registry compiles them (and
// refuses what it cannot compile, such as a remote $ref, which it never
// fetches).
func newTool(s *server, t *mcp.Tool) (*tool, error) {
	params, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	spec := tools.Spec{Name: s.cfg.Name + "." + t.Name, Title: t.Title, Description: strings.TrimSpace(t.Description),
		Category: tools.MCP, Parameters: params, Source: s.cfg.Name,
		Limits: s.cfg.ToolLimits[t.Name].Limits().Merge(s.cfg.Limits.Limits()), Effects: effects(t.Annotations),
		MaxResultBytes: tools.ResultBudget(s.cfg.MaxResultBytes)}
	spec.Confirmation = confirmation(s.cfg, t.Name, t.Annotations)
	if spec.Description == "" {
		spec.Description = fmt.Sprintf("The tool %s of the MCP server %s.", t.Name, s.cfg.Name)
	}
	if spec.Title == "" && t.Annotations != nil {
		spec.Title = t.Annotations.Title
	}
	if t.OutputSchema != nil {
		if spec.Output, err = json.Marshal(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
	}
	return &tool{srv: s, upstream: t.Name, spec: spec}, nil
}

// effects reads the server's annotations with MCP's defaults
// (ToolAnnotations: readOnlyHint false, destructiveHint true,
// idempotentHint false, openWorldHint true): a tool that says nothing is
// destructive and reaches an open world. destructiveHint means something
// only for a tool that is not read-only, so a read-only tool is not
// destructive — unless the server says destructiveHint: true outright,
// a contradiction read the cautious way: destructive, not read-only. So a
// tool is never both. They are the server's claims, shown to hosts as
// they came otherwise.
func effects(a *mcp.ToolAnnotations) tools.Effects {
	if a == nil {
		return tools.Effects{Destructive: true, OpenWorld: true}
	}
	e := tools.Effects{ReadOnly: a.ReadOnlyHint, Idempotent: a.IdempotentHint, Destructive: !a.ReadOnlyHint, OpenWorld: true}
	if d := a.DestructiveHint; d != nil && (*d || !a.ReadOnlyHint) {
		e.Destructive, e.ReadOnly = *d, e.ReadOnly && !*d
	}
	if a.OpenWorldHint != nil {
		e.OpenWorld = *a.OpenWorldHint
	}
	return e
}

// confirmation gates on the effective annotation: a tool that is
// destructive by effects — destructiveHint true, or left at MCP's default,
// annotations or none — waits for a person by default
// (confirm_destructive). One named in confirm needs a token.
func confirmation(c Config, name string, a *mcp.ToolAnnotations) tools.Confirmation {
	if effects(a).Destructive {
		switch c.ConfirmDestructive {
		case "none":
		case "", string(tools.ConfirmHuman):
			return tools.ConfirmHuman
		default:
			return tools.Confirmation(c.ConfirmDestructive)
		}
	}
	if matchAny(c.Confirm, name) {
		return tools.ConfirmToken
	}
	return tools.ConfirmNone
}

func (t *tool) Spec() tools.Spec { return t.spec }

// Execute calls the upstream tool with arguments the pipeline validated and
// sanitized, within the call's deadline. The pipeline's limiter has
// admitted it within the server's cap (ServerCaps).
func (t *tool) Execute(ctx context.Context, call *tools.Call) (any, error) {
	s := t.srv
	var sess *mcp.ClientSession
	var err error
	if s.pu != nil {
		sess, err = s.userSession(ctx) // the caller's own, as them
	} else {
		sess, err = s.session()
	}
	if err != nil {
		s.m.metrics.call(s.cfg.Name, "unavailable")
		return nil, err
	}
	params := &mcp.CallToolParams{Name: t.upstream, Arguments: call.Args}
	if call.Streaming() {
		tok := progressToken()
		params.Meta = mcp.Meta{"progressToken": tok}
		sink := &progressSink{emit: call.Emit}
		s.mu.Lock()
		s.progress[tok] = sink
		s.mu.Unlock()
		defer func() {
			sink.settle()
			s.mu.Lock()
			delete(s.progress, tok)
			s.mu.Unlock()
		}()
	}
	ctx, span := tracing.StartClient(ctx, "tools/call "+t.upstream, tracing.MCPMethodName.String("tools/call"),
		tracing.GenAIToolName.String(t.upstream), tracing.GenAIOperationName.String(tracing.ExecuteToolValue),
		tracing.UpstreamServer.String(s.cfg.Name))
	if span != nil { // the server's spans join the call's trace (MCP's _meta convention)
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		tracing.ToMeta(ctx, params.Meta)
	}
	res, err := sess.CallTool(ctx, params)
	tracing.End(span, err != nil || res.IsError, callErrorType(err, res))
	if err != nil {
		return nil, t.callError(ctx, sess, err)
	}
	if res.IsError {
		s.m.metrics.call(s.cfg.Name, "tool_error")
		msg := contentText(res.Content)
		if msg == "" {
			msg = "the upstream tool reported an error without a message"
		}
		return nil, tools.NewUserError("%s", msg).WithCode(tools.CodeUpstreamError).
			WithSuggestion("read the message: it comes from the MCP server %q", s.cfg.Name)
	}
	s.m.metrics.call(s.cfg.Name, "success")
	return resultData(res)
}

// callErrorType is a failed call's error.type: tool_error for a result
// with isError, as MCP's conventions say, jsonrpc_error otherwise.
func callErrorType(err error, res *mcp.CallToolResult) string {
	if err == nil && res != nil && res.IsError {
		return "tool_error"
	}
	return "jsonrpc_error"
}

// codeRejectedByTransport is the SDK's code for a message its transport
// could not deliver (over HTTP: the connection failed or the server
// answered with an HTTP error), which says nothing about the call itself.
const codeRejectedByTransport = -32005

// callError explains a failed call: the caller's deadline or cancellation
// is the pipeline's to report; a lost connection is retryable; an error
// the server answered with is the server's word on the arguments or itself.
func (t *tool) callError(ctx context.Context, sess *mcp.ClientSession, err error) error {
	s := t.srv
	if ctx.Err() != nil {
		s.m.metrics.call(s.cfg.Name, "cancelled")
		return ctx.Err()
	}
	if te := delegate.ToolError(err, fmt.Sprintf("the MCP server %q", s.cfg.Name)); te != nil {
		s.m.metrics.call(s.cfg.Name, "unauthorized")
		s.drop(sess)
		return te
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code != codeRejectedByTransport {
		s.m.metrics.call(s.cfg.Name, "protocol_error")
		if rpc.Code == jsonrpc.CodeInvalidParams {
			return tools.NewUserError("the MCP server %q refused the call: %s", s.cfg.Name, rpc.Message).
				WithCode(tools.CodeUpstreamRefused).WithSuggestion("check the arguments against the tool's schema")
		}
		return tools.Errorf(tools.SystemError, "the MCP server %q answered with an error: %s", s.cfg.Name, rpc.Message).
			WithCode(tools.CodeUpstreamError).Wrap(err)
	}
	s.m.metrics.call(s.cfg.Name, "unavailable")
	// Over HTTP nothing else may notice that the server went away: end
	// the session, so the server is down (new calls are refused with a
	// retry hint) and reconnected.
	s.drop(sess)
	e := tools.Errorf(tools.SystemError, "the connection to the MCP server %q was lost during the call", s.cfg.Name).
		WithCode(tools.CodeUpstreamUnavailable).WithSuggestion("retry: toold reconnects to the server on its own").Wrap(err)
	e.Retryable = true
	return e
}

// resultData maps a result to the envelope's data: the structured content
// when the server gave one; otherwise {"text": the text blocks joined,
// "content": every block} (see the README for the blocks' shape).
func resultData(res *mcp.CallToolResult) (any, error) {
	if res.StructuredContent != nil {
		return res.StructuredContent, nil
	}
	blocks := make([]map[string]any, 0, len(res.Content))
	for _, c := range res.Content {
		blocks = append(blocks, block(c))
	}
	return map[string]any{"text": contentText(res.Content), "content": blocks}, nil
}

// block is one content block in the envelope's data. Binary data stays
// base64, as MCP sends it, with its decoded size.
func block(c mcp.Content) map[string]any {
	switch v := c.(type) {
	case *mcp.TextContent:
		return map[string]any{"type": "text", "text": v.Text}
	case *mcp.ImageContent:
		return map[string]any{"type": "image", "mime_type": v.MIMEType, "data": v.Data, "bytes": len(v.Data)}
	case *mcp.AudioContent:
		return map[string]any{"type": "audio", "mime_type": v.MIMEType, "data": v.Data, "bytes": len(v.Data)}
	case *mcp.ResourceLink:
		return map[string]any{"type": "resource_link", "uri": v.URI, "name": v.Name, "title": v.Title,
			"description": v.Description, "mime_type": v.MIMEType}
	case *mcp.EmbeddedResource:
		out := map[string]any{"type": "resource"}
		if r := v.Resource; r != nil {
			out["uri"], out["mime_type"] = r.URI, r.MIMEType
			if r.Blob != nil {
				out["blob"], out["bytes"] = r.Blob, len(r.Blob)
			} else {
				out["text"] = r.Text
			}
		}
		return out
	}
	return map[string]any{"type": "unknown"}
}

func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// progressSink passes one call's progress notifications to its stream.
type progressSink struct {
	emit func(stream, data string)

	mu              sync.Mutex
	last            time.Time
	progress, total float64
}

func (p *progressSink) notify(progress, total float64, msg string) {
	p.mu.Lock()
	p.last, p.progress, p.total = time.Now(), progress, total
	p.mu.Unlock()
	p.emit("progress", msg)
}

// settle waits, briefly, for notifications still on their way: the SDK
// hands a response to its caller at once but queues notifications, so the
// last ones may be handled just after the call returned. It waits until the
// server's declared total is reached (250 ms at most), or, without a total,
// for 10 ms without a notification after the response.
func (p *progressSink) settle() {
	end := time.Now()
	for deadline := end.Add(250 * time.Millisecond); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		p.mu.Lock()
		reached := p.total > 0 && p.progress >= p.total
		last := p.last
		if last.Before(end) {
			last = end
		}
		quiet := p.total == 0 && time.Since(last) > 10*time.Millisecond
		p.mu.Unlock()
		if reached || quiet {
			return
		}
	}
}

func progressToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
