package mcpserver

import (
	"context"
	"encoding/json"
)

// A peer is the client at the other end of a call, as toold talks to it
// itself, outside the SDK's session: it asks it things (an elicitation, a
// sampling request) for a call that waits, and tells it of its tasks'
// status. Over stdio that is the one session's output; over HTTP it is the
// response of the request at hand, turned into an event stream the moment
// toold has something to send on it (see httpPeer). Answers come back as
// JSON-RPC responses to toold's own request ids (answers.go), over stdio
// on the same input, over HTTP in a POST of their own.
type peer struct {
	stdio bool
	// caps are what the client declared when it initialized.
	caps func() clientCaps
	// send writes one JSON-RPC message to the client.
	send func(msg []byte) error
	// heartbeat, when set, keeps a long wait's stream open.
	heartbeat func() error
	// answered, when set, is closed once the answer to the request this
	// peer serves is written: what a task tells of itself waits for it, so
	// that a client hears of a task only after the answer that names it.
	answered chan struct{}
}

// clientCaps is what toold reads of a client's initialize: its protocol
// version and whether it can be asked (a form elicitation, a sampling
// request) and speaks tasks. The SDK's own ClientCapabilities drops tasks,
// so toold reads the request's raw capabilities itself.
type clientCaps struct {
	Version     string `json:"v"`
	Elicitation bool   `json:"e,omitempty"`
	Sampling    bool   `json:"s,omitempty"`
	Tasks       bool   `json:"t,omitempty"`
	// URL: the client takes URL-mode elicitations (2025-11-25), as a
	// consent step's URLElicitationRequiredError.
	URL bool `json:"u,omitempty"`
}

// capsOf reads an initialize request's params, with member names as
// written (JSON's names are case-sensitive; encoding/json's struct fields
// are not).
func capsOf(params json.RawMessage) clientCaps {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return clientCaps{}
	}
	var c map[string]json.RawMessage
	_ = json.Unmarshal(p["capabilities"], &c)
	var version string
	_ = json.Unmarshal(p["protocolVersion"], &version)
	// An empty elicitation capability is a form one (2025-06-18); later
	// clients name the modes they take.
	var modes map[string]json.RawMessage
	form := present(c["elicitation"]) && json.Unmarshal(c["elicitation"], &modes) == nil &&
		(present(modes["form"]) || !present(modes["url"]))
	return clientCaps{Version: version, Elicitation: form, Sampling: present(c["sampling"]), Tasks: present(c["tasks"]),
		URL: present(c["elicitation"]) && present(modes["url"])}
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

type peerKey struct{}

// peerSource makes a call's peer when it is needed: most calls never ask
// their client anything, and the hot path builds nothing for them.
type peerSource interface{ asPeer() *peer }

func (p *peer) asPeer() *peer { return p }

func withPeer(ctx context.Context, p peerSource) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// peerOf is the call's peer, or nil where toold cannot talk to the client
// itself (an HTTP call the SDK answers, a 2026-07-28 client, which MCP's
// own multi-round-trip requests serve, a client that declared nothing).
func peerOf(ctx context.Context) *peer {
	if src, ok := ctx.Value(peerKey{}).(peerSource); ok {
		return src.asPeer()
	}
	return nil
}

// canAsk reports whether the peer can answer a question of the kind a
// wait needs: an input as a form elicitation, a subtask as sampling.
func (p *peer) canAsk(waitFor string) bool {
	if p == nil || p.send == nil || p.caps().Version >= multiRoundTrip {
		return false
	}
	switch waitFor {
	case "input", "confirm":
		return p.caps().Elicitation
	case "subtask":
		return p.caps().Sampling
	}
	return false
}
