package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
)

// Meta keys toold reads and writes in MCP's _meta.
const (
	// MetaEnvelope carries the envelope's bookkeeping on every result:
	// request id, status, duration, timing and what the sanitizer did.
	MetaEnvelope = "toold/envelope"
	// MetaError carries the envelope's error on every failed result.
	MetaError = "toold/error"
	// MetaConfirmToken carries a confirmation token: in a result that asks
	// for confirmation, and in the _meta of the call that repeats it.
	MetaConfirmToken = "toold/confirm_token"
	// MetaConfirmExpires says until when the token is valid (RFC 3339).
	MetaConfirmExpires = "toold/confirm_expires_at"
)

// envelopeMeta is the envelope without data and error, which the result
// carries in its own fields (dispatch.Envelope.AppendBookkeeping).
func envelopeMeta(env *dispatch.Envelope) json.RawMessage {
	return env.AppendBookkeeping(nil)
}

// render turns an envelope into a tools/call result. A success is the data
// as structuredContent plus one text block with the same JSON. A failure is
// isError with a text that tells the model what went wrong and what to do,
// then a text with the data a failing tool produced (a command's output),
// if any, and the envelope's error in _meta; it is the structuredContent too when
// the tool declares no output schema (a client holding the tool's output
// schema checks structuredContent against it, even on an error).
func render(env *dispatch.Envelope, hasOutputSchema bool) *mcp.CallToolResult {
	meta := mcp.Meta{MetaEnvelope: envelopeMeta(env)}
	if env.Error == nil {
		data := env.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		res := &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: string(data)}},
			StructuredContent: data}
		if env.Artifact != nil {
			res.Content = append(res.Content, artifactLink(env.Artifact, len(data)))
		}
		return res
	}
	meta[MetaError] = env.Error
	res := &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: describe(env.Error)}}}
	if len(env.Data) > 0 { // what the tool produced with its failure (a command's output)
		res.Content = append(res.Content, &mcp.TextContent{Text: string(env.Data)})
		if env.Artifact != nil {
			res.Content = append(res.Content, artifactLink(env.Artifact, len(env.Data)))
		}
	}
	if !hasOutputSchema {
		res.StructuredContent = env.Error
	}
	return res
}

// describe is the error as a model reads it: what went wrong, what to do,
// which fields, and when to retry.
func describe(e *dispatch.ErrorBody) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Type, e.Message)
	if e.Suggestion != "" {
		fmt.Fprintf(&b, "\nWhat to do: %s", e.Suggestion)
	}
	if e.AuthorizeURL != "" {
		fmt.Fprintf(&b, "\nAuthorize at: %s", e.AuthorizeURL)
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "\n- %s", f)
	}
	if len(e.Example) > 0 {
		fmt.Fprintf(&b, "\nA valid call: %s", e.Example)
	}
	if e.Retryable {
		if e.RetryAfterMS > 0 {
			fmt.Fprintf(&b, "\nRetry after %d ms.", e.RetryAfterMS)
		} else {
			b.WriteString("\nThis may succeed if retried.")
		}
	}
	return b.String()
}
