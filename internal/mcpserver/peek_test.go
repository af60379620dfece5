package mcpserver

import (
	"encoding/json"
	"testing"
)

func TestPeek(t *testing.T) {
	tests := []struct {
		body string
		want message
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`, message{method: "tools/call", id: "n:7"}},
		{`{"jsonrpc":"2.0","id":"7","method":"tools/call"}`, message{method: "tools/call", id: "s:7"}},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, message{method: "notifications/cancelled", cancelled: "n:7"}},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`, message{method: "notifications/cancelled", cancelled: "s:a"}},
		{`{"jsonrpc":"2.0","method":"tools/call"}`, message{}},                                  // a notification: no id
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`, message{}},                         // a batch
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call"}`, message{method: "tools/call"}}, // not an id
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"tools/call"}}`, message{}},
		{`not json "tools/call"`, message{}},
		{`{"jsonrpc":"2.0","id":3,"method":"tools\/call"}`, message{method: "tools/call", id: "n:3"}}, // escapes are still the method
	}
	for _, tt := range tests {
		if got := peek([]byte(tt.body)); got != tt.want {
			t.Errorf("peek(%s) = %+v, want %+v", tt.body, got, tt.want)
		}
	}
}

// FuzzPeek: peek reads untrusted bodies; it never panics, and names an id
// only for the two methods it routes.
func FuzzPeek(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`)
	f.Add(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1e400}}`)
	f.Add(`{"method":"tools/call","id":"\ud800"}`)
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"tools\/call"}`)
	f.Fuzz(func(t *testing.T, body string) {
		m := peek([]byte(body))
		var plain struct{ Method string }
		if (m.id != "" || m.cancelled != "") && (json.Unmarshal([]byte(body), &plain) != nil || plain.Method != m.method) {
			t.Fatalf("peek(%q) = %+v, the body's method is %q", body, m, plain.Method)
		}
		if m.id != "" && m.cancelled != "" {
			t.Fatalf("both an id and a cancelled id: %+v", m)
		}
	})
}
