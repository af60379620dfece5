package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const echoArgs = `{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`

// BenchmarkCall compares, in process and side by side, one echo call over
// REST, over toold's /mcp (its fast path answers it; mcp-sdk-only leaves
// it to the SDK, as before the fast path), and on a bare go-sdk stateless server (no
// pipeline; typed, so the SDK validates, and low-level, as toold registers
// its tools): what toold's MCP transport costs on top of the SDK, and what
// the SDK costs on top of REST. B/op shows where the time goes: the SDK
// decodes each message several times, each with a fresh 32 KiB buffer.
func BenchmarkCall(b *testing.B) {
	h := newBenchHarness(b, harnessOpts{})
	sdkOnly := newBenchHarness(b, harnessOpts{noFast: true})
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(bare, &mcp.Tool{Name: "echo", Description: "Echoes."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"message": in["message"], "data": in["data"], "length": len(in["message"].(string))}, nil
		})
	bareH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, &mcp.StreamableHTTPOptions{Stateless: true})
	// The like-for-like baseline: a low-level tool, no schema validation
	// by the SDK, as toold registers its tools.
	low := mcp.NewServer(&mcp.Implementation{Name: "bare-low", Version: "1"}, nil)
	low.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			b, err := json.Marshal(map[string]any{"message": in["message"], "data": in["data"], "length": len(in["message"].(string))})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
		})
	lowH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return low }, &mcp.StreamableHTTPOptions{Stateless: true})
	mcpBody := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + echoArgs + `}}`
	for _, c := range []struct {
		name    string
		handler http.Handler
		path    string
		body    string
		want    string
	}{
		{"rest", h, "/tools/echo/execute", echoArgs, `"success":true`},
		{"mcp", h, "/mcp", mcpBody, `"structuredContent"`},
		{"mcp-sdk-only", sdkOnly, "/mcp", mcpBody, `"structuredContent"`},
		{"bare-sdk", bareH, "/mcp", mcpBody, `"structuredContent"`},
		{"bare-sdk-lowlevel", lowH, "/mcp", mcpBody, `"structuredContent"`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+c.path, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				if c.path == "/mcp" {
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("MCP-Protocol-Version", "2025-06-18")
				} // REST as the load harness calls it: one JSON answer, not a stream
				w := httptest.NewRecorder()
				c.handler.ServeHTTP(w, req)
				if w.Code != 200 || !strings.Contains(w.Body.String(), c.want) {
					b.Fatalf("%d %s", w.Code, w.Body.String())
				}
			}
		})
	}
}
