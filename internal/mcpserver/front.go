package mcpserver

import (
	"context"
	"mime"
	"net/http"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/registry"
)

// front is toold's MCP layer in front of the SDK, over HTTP: it answers
// itself what the SDK does not know or does slower, and hands the rest
// on. In order:
//
//   - the plainest tools/call, on the fast path (fastpath.go);
//   - a client's answer to one of toold's own requests (answers.go), which
//     the SDK's stateless sessions could not route;
//   - the tasks methods and task-augmented calls (tasks.go);
//   - for the SDK: a tools/call's id and a cancellation, for the table of
//     calls in flight (transport.go), and an initialize, whose client is
//     given a session id when toold may ask it things (session.go).
//
// It returns the request the SDK should serve (with what toold learned
// in its context), or served true when it answered. A toolset's server
// (set) has no fast path: its calls go to the SDK, which knows its list.
func (s *Server) front(w http.ResponseWriter, r *http.Request, body []byte, set *registry.Toolset) (*http.Request, bool) {
	ctx := r.Context()
	who, err := caller(ctx)
	if err != nil {
		s.log.Error("an MCP request reached the server without a caller", zap.Error(err))
		WriteError(w, http.StatusInternalServerError, "internal error: the request has no authenticated caller")
		return r, true
	}
	hp := &httpPeer{w: w}
	if caps, ok := s.sessions.read(who.Name, r.Header.Get(sessionHeader)); ok {
		hp.caps = caps
	}
	if c, ok := s.fastCallOf(r, body); ok && set == nil {
		ctx = context.WithValue(ctx, rpcIDKey{}, c.key())
		s.serveFast(hp, r.WithContext(withPeer(ctx, hp)), c)
		return r, true
	}
	m, ok := decodeOne(body)
	if !ok {
		return r, false
	}
	if id, ans, ok := ownAnswer(m); ok {
		s.answered(ctx, who.Name, id, ans)
		w.WriteHeader(http.StatusAccepted)
		return r, true
	}
	if s.ownRequest(&m) && plainPost(r, m) {
		p := hp.peer()
		hp.answer(http.StatusOK, s.serveOwnRequest(withPeer(ctx, p), p, m))
		return r, true
	}
	switch pm := peekMessage(m); pm.method {
	case "tools/call":
		ctx = context.WithValue(ctx, rpcIDKey{}, pm.id)
		if hp.caps.URL {
			ctx = context.WithValue(ctx, urlElicitKey{}, true)
		}
	case "notifications/cancelled":
		s.calls.cancel(who.Name, pm.cancelled)
	}
	if m.Method == "initialize" {
		caps := capsOf(m.Params)
		if id := s.sessions.issue(who.Name, caps); id != "" {
			w.Header().Set(sessionHeader, id)
		}
		ctx = withPeer(ctx, &peer{caps: func() clientCaps { return caps }})
	}
	return r.WithContext(ctx), false
}

// plainPost reports whether a request has what the SDK requires of every
// POST — Content-Type application/json, an Accept naming both JSON and
// event streams, no Last-Event-ID, a protocol version it speaks (for the
// 2026-07-28 tasks extension, the header and the request's _meta naming
// the same) — so that toold answers only what the SDK would not refuse;
// anything else goes to the SDK, whose refusal it gets.
func plainPost(r *http.Request, m wireMessage) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" || !acceptsBoth(r.Header.Values("Accept")) || len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	if v2Request(m) {
		return v == multiRoundTrip && metaVersion(m.Params) == v
	}
	return v == "" || fastVersions[v]
}
