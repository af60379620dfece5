package mcpserver_test

import (
	"net/url"
	"strings"
	"testing"
)

// meta2026 is the _meta a 2026-07-28 request carries in place of a session.
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

// echoToken has the shape of a GitHub token, which the sanitizer detects.
const echoToken = "ghp_Zq8XcV2bN4mL6kJ9hG3fD5sA7pO1iU0yTr2w"

// TestMCPRefusalsEchoNoSecret: the MCP error paths repeat nothing secret
// of what the client sent — an unknown tool's name (which the SDK itself
// quotes), a method, a field's name, an execution id in a request state,
// an Origin or Host refused before the SDK — as REST refusals do not.
func TestMCPRefusalsEchoNoSecret(t *testing.T) {
	h := newHarness(t, harnessOpts{keys: true, store: true})
	tok := echoToken
	auth := map[string]string{"Authorization": "Bearer " + fullKey, "MCP-Protocol-Version": v0618}
	with := func(k, v string) map[string]string {
		m := map[string]string{"Authorization": "Bearer " + fullKey}
		m[k] = v
		return m
	}
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
	}
	tests := []struct {
		name, body string
		header     map[string]string
	}{
		{"unknown tool", call(`{"name":"` + tok + `","arguments":{}}`), auth},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"` + tok + `"}`, auth},
		{"field name", call(`{"name":"echo","arguments":{"message":"x","` + tok + `":1}}`), auth},
		{"field value", call(`{"name":"sleep","arguments":{"ms":"` + tok + `"}}`), auth},
		{"request state", call(`{"name":"echo","arguments":{"message":"x"},"requestState":"exec:` + tok + `",` + meta2026 + `}`),
			map[string]string{"Authorization": "Bearer " + fullKey, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}},
		{"protocol version header", call(`{"name":"echo","arguments":{"message":"x"},` + meta2026 + `}`),
			map[string]string{"Authorization": "Bearer " + fullKey, "MCP-Protocol-Version": tok, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}},
		{"method header", call(`{"name":"echo","arguments":{"message":"x"},` + meta2026 + `}`),
			map[string]string{"Authorization": "Bearer " + fullKey, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": tok, "Mcp-Name": "echo"}},
		{"name header", call(`{"name":"echo","arguments":{"message":"x"},` + meta2026 + `}`),
			map[string]string{"Authorization": "Bearer " + fullKey, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tok}},
		{"key", call(`{"name":"echo","arguments":{}}`), map[string]string{"Authorization": "Bearer " + tok}},
		{"origin", call(`{"name":"echo","arguments":{}}`), with("Origin", "https://"+tok+".example")},
		{"content type", call(`{"name":"echo","arguments":{}}`), with("Content-Type", "text/"+tok)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := h.post(tc.body, tc.header)
			if status == 200 && !strings.Contains(string(body), "error") && !strings.Contains(string(body), "isError") {
				t.Fatalf("not refused: %s", body)
			}
			for _, s := range []string{tok, tok[12:], url.QueryEscape(tok)} {
				if strings.Contains(string(body), s) {
					t.Fatalf("the token came back: %d %s", status, body)
				}
				for k, vs := range hdr {
					for _, v := range vs {
						if strings.Contains(v, s) {
							t.Fatalf("the token came back in %s: %q", k, v)
						}
					}
				}
			}
		})
	}
}
