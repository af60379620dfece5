package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
)

// redacted is the one place MCP answers leave the server (the receiving
// middleware, over HTTP and stdio alike): a protocol error, and a tool
// result that is an error, are redacted as REST redacts its refusals
// (dispatch.Redact). They may quote the request — the SDK names an
// unknown tool as it was asked for, a resumption names the execution its
// request state gave — and whatever the client sent may hold a secret.
func (s *Server) redacted(res mcp.Result, err error) (mcp.Result, error) {
	if err != nil {
		return res, s.redactError(err)
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
		s.redactResult(r)
	}
	return res, nil
}

// redactError keeps the error's JSON-RPC code (the SDK takes it from the
// wrapped error) and redacts its message.
func (s *Server) redactError(err error) error {
	msg := s.opts.Dispatcher.RedactText(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (s *Server) redactResult(r *mcp.CallToolResult) {
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			tc.Text = s.opts.Dispatcher.RedactText(tc.Text)
		}
	}
	for _, v := range []any{r.Meta[MetaError], r.StructuredContent} {
		if eb, ok := v.(*dispatch.ErrorBody); ok {
			s.opts.Dispatcher.Redact(&dispatch.Envelope{Error: eb})
		}
	}
}
