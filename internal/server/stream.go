package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"toold/internal/dispatch"
	"toold/internal/tools"
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
	rc     *http.ResponseController
	mu     sync.Mutex
	opened bool
	closed bool
}

func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func newEventStream(w http.ResponseWriter) *eventStream {
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

// open writes the headers and the start event.
func (s *eventStream) open(requestID, tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	s.w.WriteHeader(http.StatusOK)
	s.opened = true
	s.write("start", map[string]any{"request_id": requestID, "tool": tool, "started_at": time.Now().UTC()})
}

// output sends a chunk; chunks arriving after the end (from a tool still
// running past its deadline) are dropped.
func (s *eventStream) output(c tools.Chunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened && !s.closed {
		s.write("output", c)
	}
}

// finish sends the final event and closes the stream; it reports false when
// the stream never opened (the caller then writes a plain envelope).
func (s *eventStream) finish(env *dispatch.Envelope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opened {
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

// write sends one event; s.mu must be held. JSON never contains a raw
// newline, so one data line carries the whole payload.
func (s *eventStream) write(event string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	buf := make([]byte, 0, len(data)+len(event)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, event...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err == nil {
		_ = s.rc.Flush()
	}
}
