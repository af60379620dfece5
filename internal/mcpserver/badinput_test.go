package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/apitest"
)

// post sends a raw body to /mcp through the contract checker.
func (h *harness) post(body string, header map[string]string) (int, http.Header, []byte) {
	h.t.Helper()
	resp := h.send("/mcp", body, header, 10*time.Second)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// send posts a raw body to path (/mcp, /mcp/<toolset>) through the contract checker, with the
// headers MCP asks for unless header changes them ("" deletes one; Host
// sets the request's host); the caller closes the response.
func (h *harness) send(path, body string, header map[string]string, timeout time.Duration) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: apitest.Checker(h.t, http.DefaultTransport), Timeout: timeout}
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// rpcError reads the JSON-RPC error of a refusal body.
func rpcError(body []byte) (code int64, msg string) {
	var m struct {
		Error struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &m)
	return m.Error.Code, m.Error.Message
}

const v0618 = "2025-06-18"

// TestBadInput: each malformed or refused request gets a clear error with
// the right status — a JSON-RPC error body where the SDK did not answer in
// the protocol itself — and toold keeps serving.
func TestBadInput(t *testing.T) {
	h := newHarness(t, harnessOpts{keys: true, maxBody: 4096, origins: []string{"https://ok.example"}})
	auth := "Bearer " + fullKey
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`
	tests := []struct {
		name   string
		body   string
		header map[string]string
		status int
		code   int64
		says   string
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, map[string]string{"Authorization": auth, "MCP-Protocol-Version": v0618}, 400, -32700, "malformed"},
		{"not JSON-RPC", `{"id":1,"method":"tools/list"}`, map[string]string{"Authorization": auth, "MCP-Protocol-Version": v0618}, 400, -32700, "version"},
		{"a batch", `[` + call + `]`, map[string]string{"Authorization": auth, "MCP-Protocol-Version": v0618}, 400, 0, "batch"},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tools/destroy"}`, map[string]string{"Authorization": auth, "MCP-Protocol-Version": v0618}, 400, -32601, "tools/destroy"},
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("a", 5000) + `"}}}`,
			map[string]string{"Authorization": auth, "MCP-Protocol-Version": v0618}, 413, -32600, "4096-byte limit"},
		{"unsupported protocol version", call, map[string]string{"Authorization": auth, "MCP-Protocol-Version": "1999-01-01"}, 400, -32600, "Unsupported protocol version"},
		{"no key", call, map[string]string{"MCP-Protocol-Version": v0618}, 401, -32600, "no API key"},
		{"bad key", call, map[string]string{"Authorization": "Bearer nope", "MCP-Protocol-Version": v0618}, 401, -32600, "not valid"},
		{"foreign origin", call, map[string]string{"Authorization": auth, "Origin": "https://evil.example"}, 403, -32600, "origin"},
		{"not json content", call, map[string]string{"Authorization": auth, "Content-Type": "text/plain"}, 415, -32600, "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := h.post(tt.body, tt.header)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			code, msg := rpcError(body)
			if tt.code != 0 && code != tt.code {
				t.Errorf("JSON-RPC code %d, want %d: %s", code, tt.code, body)
			}
			if !strings.Contains(strings.ToLower(string(body)), strings.ToLower(tt.says)) {
				t.Errorf("the answer %q does not say %q", msg, tt.says)
			}
			if status == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// A missing MCP-Protocol-Version is the spec's fallback (2025-03-26),
	// not an error; and after all of the above toold still serves.
	status, _, body := h.post(call, map[string]string{"Authorization": auth})
	if status != 200 || !bytes.Contains(body, []byte(`"structuredContent":{"message":"x","length":1}`)) {
		t.Errorf("a good call after the bad ones: %d %s", status, body)
	}
}

// TestRESTAndMCPRefuseAlike: the same origin, Host and key decide the same
// for GET /tools and POST /mcp.
func TestRESTAndMCPRefuseAlike(t *testing.T) {
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, keys := range []bool{false, true} {
		h := newHarness(t, harnessOpts{keys: keys, origins: []string{"https://ok.example"}})
		for _, hdr := range []map[string]string{
			{},
			{"Origin": "https://ok.example"},
			{"Origin": "https://evil.example"},
			{"Origin": "null"},
			{"Host": "evil.example"},
			{"Host": "localhost:1"},
			{"Host": "127.0.0.1.nip.io"},
			{"Authorization": "Bearer " + fullKey},
			{"Authorization": "Bearer " + fullKey, "Host": "evil.example"},
			{"Authorization": "Bearer nope"},
			{"Authorization": "Basic " + fullKey},
		} {
			req, _ := http.NewRequest(http.MethodGet, h.url+"/tools", nil)
			for k, v := range hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			status, _, body := h.post(init, hdr)
			if status != resp.StatusCode {
				t.Errorf("keys=%v %v: REST %d, MCP %d (%s)", keys, hdr, resp.StatusCode, status, body)
			}
		}
	}
}
