package reqbody

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Unread reports whether r carries a body, for a request whose handler
// has not read it: one that was refused first. net/http would close the
// connection after the answer (past 256 KiB left), half a second later,
// holding the request's goroutine; or read what is left first (up to
// 256 KiB), for as long as a stalled client lets it, up to the server's
// ReadTimeout. Hanging up (HangUp) costs neither; the price, a connection
// not kept alive after a refusal, is paid only by clients that sent a body
// toold had no use for.
func Unread(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// lingerDelay is how long a connection stays half-closed after its
// answer, so that the client reads the answer before the close resets
// the connection (its body unread): net/http's rstAvoidanceDelay.
const lingerDelay = 500 * time.Millisecond

// HangUp answers a request whose body was not read to its end — refused
// before or while reading it — with status, w's headers and body, and
// closes the connection. net/http does the same (Connection: close, then
// half-close and half a second's wait) with the request's goroutine
// sleeping through the wait, its stack and buffers held: under a flood of
// refused uploads that cost more than the bodies. Here the connection is
// taken over (hijacked), answered, half-closed and handed to one goroutine
// that closes each when its wait is over, so a refused upload holds only
// its socket for that half second. It reports false, having written
// nothing, when the connection cannot be taken over (HTTP/2, a recorder);
// the caller then answers as usual.
func (rd *Reader) HangUp(w http.ResponseWriter, status int, body []byte) bool {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(rw)
	_, _ = rw.WriteString("\r\n")
	_, _ = rw.Write(body)
	if rw.Flush() != nil {
		_ = conn.Close()
		return true
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	rd.reaper.add(conn)
	return true
}

// reaper closes half-closed connections once their linger is over, all
// from one goroutine that runs while any wait. Every wait is the same
// length, so the queue is in order.
type reaper struct {
	delay   time.Duration // lingerDelay; a test makes it longer
	mu      sync.Mutex
	queue   []lingering
	running bool
}

type lingering struct {
	c  net.Conn
	at time.Time
}

func (r *reaper) add(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, lingering{c, time.Now().Add(r.delay)})
	if !r.running {
		r.running = true
		go r.run()
	}
}

func (r *reaper) run() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.running, r.queue = false, nil
			r.mu.Unlock()
			return
		}
		next := r.queue[0] // stays queued until closed: only run takes from the queue
		r.mu.Unlock()
		time.Sleep(time.Until(next.at))
		_ = next.c.Close()
		r.mu.Lock()
		r.queue[0] = lingering{}
		r.queue = r.queue[1:]
		r.mu.Unlock()
	}
}
