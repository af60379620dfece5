package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// Server-sent events of a streamed execution. The names are the source
// documents' START / OUTPUT_CHUNK / END / ERROR:
//
//	event: start   data: {"request_id", "tool", "started_at"}
//	event: output  data: {"stream": "stdout"|"stderr", "chunk": "..."}
//	event: end     data: the envelope of a successful call
//	event: error   data: the envelope of a failed call
//
// The stream opens only when the tool starts running; a call refused before
// that (validation, confirmation, overload) is answered as a plain envelope
// with its HTTP status, so clients need not parse a stream to see a 400.
type eventStream struct {
	w      http.ResponseWriter
	mu     sync.Mutex // guards out and closed
	out    *sse       // once opened
	closed bool
}

func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func newEventStream(w http.ResponseWriter) *eventStream { return &eventStream{w: w} }

// open writes the headers and the start event.
func (s *eventStream) open(requestID, tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = openSSE(s.w)
	s.write("start", map[string]any{"request_id": requestID, "tool": tool, "started_at": time.Now().UTC()})
}

// output sends a chunk; chunks arriving after the end (from a tool still
// running past its deadline) are dropped.
func (s *eventStream) output(c tools.Chunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out != nil && !s.closed {
		s.write("output", c)
	}
}

// finish sends the final event and closes the stream; it reports false when
// the stream never opened (the caller then writes a plain envelope).
func (s *eventStream) finish(env *dispatch.Envelope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return false
	}
	name := "end"
	if !env.Success {
		name = "error"
	}
	s.write(name, env)
	s.closed = true
	return true
}

// write sends one event; s.mu must be held.
func (s *eventStream) write(event string, v any) {
	if data, err := json.Marshal(v); err == nil {
		_ = s.out.event("", event, data)
	}
}

// event and comment let an execution's events follow on the stream once
// the call paused (see Server.follow).
func (s *eventStream) event(id, name string, data []byte) error { return s.out.event(id, name, data) }
func (s *eventStream) comment(text string)                      { s.out.comment(text) }
