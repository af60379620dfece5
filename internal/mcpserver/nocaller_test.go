package mcpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNoCallerIsAnError (issue 38, item 5): /mcp served without toold's
// authentication in front of it — a route mounted outside the guarded
// group — answers every request with an error; it never serves the
// request as the anonymous local user, who may use every tool.
func TestNoCallerIsAnError(t *testing.T) {
	h := newHarness(t, harnessOpts{keys: true})
	bare := httptest.NewServer(h.mcp.Handler())
	t.Cleanup(bare.Close)
	for name, body := range map[string]string{
		"tools/list":         `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"a fast-path call":   `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		"an initialize":      `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		"a task-shaped call": `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{},"task":{}}}`,
	} {
		req, err := http.NewRequest("POST", bare.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "no authenticated caller") {
			t.Errorf("%s without a caller: %d %s, want 500", name, resp.StatusCode, b)
		}
	}
}
