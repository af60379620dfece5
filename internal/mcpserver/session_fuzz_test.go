package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzSessionID: a session id comes from the client; reading any string
// never panics, and only an id toold issued, unchanged, for the same
// caller, reads back — as what was issued.
func FuzzSessionID(f *testing.F) {
	k := newSessionKeys([]byte("a secret of at least thirty-two bytes"))
	good := k.issue("agent", clientCaps{Version: "2025-11-25", Elicitation: true})
	f.Add(good, "agent")
	f.Add(good, "other")
	f.Add(good+"x", "agent")
	f.Add(".", "")
	f.Add(strings.Repeat("A", 600)+".AA", "agent")
	f.Fuzz(func(t *testing.T, id, caller string) {
		caps, ok := k.read(caller, id)
		if ok && (id != good || caller != "agent" || caps != (clientCaps{Version: "2025-11-25", Elicitation: true})) {
			t.Fatalf("read %q for %q as %+v", id, caller, caps)
		}
		if !ok && caps != (clientCaps{}) {
			t.Fatalf("an unread id gave %+v", caps)
		}
	})
}

// FuzzCapsOf: an initialize's params come from the client; whatever they
// are, reading them never panics, and a client is asked only for what it
// declared.
func FuzzCapsOf(f *testing.F) {
	for _, s := range []string{`{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}},"sampling":{},"tasks":{"list":{}}}}`,
		`{"capabilities":{"elicitation":null,"tasks":null}}`, `[]`, `{"capabilities":5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		c := capsOf(json.RawMessage(params))
		var raw struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		_ = json.Unmarshal([]byte(params), &raw)
		if c.Elicitation && !present(raw.Capabilities["elicitation"]) || c.Sampling && !present(raw.Capabilities["sampling"]) ||
			c.Tasks && !present(raw.Capabilities["tasks"]) {
			t.Fatalf("capsOf(%s) = %+v: more than declared", params, c)
		}
	})
}

// FuzzOwnAnswer: a message on stdin or in a POST is an answer to one of
// toold's requests only when its id is toold's, and it is not a request.
func FuzzOwnAnswer(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":"toold/exec/0123456789abcdef01234567/1","result":{"action":"accept"}}`)
	f.Add(`{"jsonrpc":"2.0","id":"toold/confirm/x","error":{"code":-1,"message":"no"}}`)
	f.Add(`{"jsonrpc":"2.0","id":"toold/x","method":"ping"}`)
	f.Add(`{"id":7,"result":{}}`)
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := decodeOne([]byte(line))
		if !ok {
			return
		}
		id, _, own := ownAnswer(m)
		if own && (m.Method != "" || !strings.HasPrefix(id, ownIDPrefix)) {
			t.Fatalf("%s read as an answer to %q", line, id)
		}
	})
}
