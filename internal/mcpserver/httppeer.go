package mcpserver

import (
	"net/http"
	"sync"
)

// httpPeer is the client of one HTTP request, as toold talks to it itself.
// The answer starts as nothing: a first message sent before the answer is
// known (a question, a task's status) turns the response into an event
// stream, as Streamable HTTP lets a server choose, and the answer is then
// its last event; otherwise the answer is one JSON body.
type httpPeer struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	streaming bool
	caps      clientCaps
}

func (h *httpPeer) peer() *peer {
	return &peer{send: h.send, heartbeat: h.comment, caps: func() clientCaps { return h.caps }}
}

func (h *httpPeer) asPeer() *peer { return h.peer() }

// send writes msg as an event, starting the stream if it has not started.
func (h *httpPeer) send(msg []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.streaming {
		hd := h.w.Header()
		hd.Set("Content-Type", "text/event-stream")
		hd.Set("Cache-Control", "no-cache, no-transform")
		h.w.WriteHeader(http.StatusOK)
		h.streaming = true
	}
	if _, err := h.w.Write(append(append([]byte("event: message\ndata: "), msg...), "\n\n"...)); err != nil {
		return err
	}
	return http.NewResponseController(h.w).Flush()
}

// comment keeps a stream open through proxies that close idle ones.
func (h *httpPeer) comment() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.streaming {
		return nil
	}
	if _, err := h.w.Write([]byte(": waiting\n\n")); err != nil {
		return err
	}
	return http.NewResponseController(h.w).Flush()
}

// answer writes the response: the stream's last event, or the JSON body
// with status.
func (h *httpPeer) answer(status int, msg []byte) {
	h.mu.Lock()
	streaming := h.streaming
	h.mu.Unlock()
	if streaming {
		_ = h.send(msg)
		return
	}
	h.w.Header().Set("Content-Type", "application/json")
	h.w.WriteHeader(status)
	_, _ = h.w.Write(msg)
}
