package server

import (
	"bytes"
	"container/list"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// ConnLimit caps the connections of a listener without letting idle ones
// lock clients out. A plain cap (netutil.LimitListener) counts a keep-alive
// connection that waits for its next request, and one that never sent a
// byte, as fully as a busy one: a few idle clients, or a few silent ones,
// take every place. Here, at the cap:
//
//   - an idle keep-alive connection (http.StateIdle: between requests) is
//     closed to make room, the longest idle first — a client that comes
//     back dials again, as it would after idle_timeout;
//   - failing that, a silent connection — one that has not yet sent a
//     whole request, and has sent nothing for more than SilentAfter — is
//     closed, the longest-standing first: a client dials and writes its
//     request at once, so a connection quiet for a second holds a place
//     and does nothing with it (a handful of them, reopened as
//     read_header_timeout cuts them, used to keep every newcomer out);
//   - when every connection is busy, the newcomer is accepted, told 503
//     with Retry-After and Connection: close, and closed — at once, rather
//     than left waiting in the kernel's accept queue.
//
// Wire it with Listener (around the API's listener) and ConnState (the
// http.Server's hook). HTTP/2 is not served (no TLS, no h2c); should it be,
// net/http reports an h2 connection idle when no stream is open, and the
// same rules hold.
type ConnLimit struct {
	max        int
	retryAfter time.Duration
	refusal    []byte // the whole 503 response

	mu     sync.Mutex
	open   int
	idle   *list.List    // of *limitedConn, longest idle first
	fresh  *list.List    // of *limitedConn that have not yet sent a whole request, oldest first
	slots  chan struct{} // bounds the refusals being written at once
	silent time.Duration // how long a fresh connection may send nothing before a newcomer may take its place

	gauge, idleGauge           prometheus.Gauge
	evictedTotal, refusedTotal prometheus.Counter
}

// DefaultRetryAfter is the Retry-After of a connection refused at the cap.
const DefaultRetryAfter = time.Second

// SilentAfter is how long a connection that has not sent a whole request
// may send nothing before a newcomer at the cap takes its place. A client
// writes its request as soon as it has dialled; a second covers a slow
// network's round trips with room to spare.
const SilentAfter = time.Second

// NewConnLimit builds a cap of max connections (max > 0); reg receives its
// metrics (nil registers nothing).
func NewConnLimit(max int, reg prometheus.Registerer) *ConnLimit {
	f := promauto.With(reg)
	l := &ConnLimit{max: max, retryAfter: DefaultRetryAfter, idle: list.New(), fresh: list.New(), slots: make(chan struct{}, 128),
		silent: SilentAfter,
		gauge: f.NewGauge(prometheus.GaugeOpts{Name: "toold_http_connections",
			Help: "Connections open on the API listener, against toold_http_connections_max."}),
		idleGauge: f.NewGauge(prometheus.GaugeOpts{Name: "toold_http_connections_idle",
			Help: "Keep-alive connections of the API listener waiting for their next request: the ones a newcomer at the cap may evict."}),
		evictedTotal: f.NewCounter(prometheus.CounterOpts{Name: "toold_http_connections_evicted_total",
			Help: "Idle keep-alive and silent connections closed to make room for a new one at max_connections."}),
		refusedTotal: f.NewCounter(prometheus.CounterOpts{Name: "toold_http_connections_refused_total",
			Help: "Connections answered 503 because max_connections were open and busy."}),
	}
	f.NewGauge(prometheus.GaugeOpts{Name: "toold_http_connections_max",
		Help: "The cap on connections of the API listener (server.max_connections)."}).Set(float64(max))
	l.refusal = refusalResponse(l.retryAfter)
	return l
}

// refusalResponse is the whole HTTP/1.1 response a refused connection
// gets: the envelope of an overload, with the status the one table gives.
func refusalResponse(retry time.Duration) []byte {
	te := tools.Errorf(tools.OverloadError, "toold has as many connections open as it accepts, all of them busy").
		WithCode(tools.CodeConnectionCapacity).WithRetryAfter(retry).
		WithSuggestion("retry after %v; keep fewer connections open, or ask the operator to raise server.max_connections", retry)
	env := dispatch.Failure("", "", dispatch.StatusRejected, te)
	status := httpStatus(env)
	body := append(env.AppendJSON(nil), '\n')
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nRetry-After: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
		status, http.StatusText(status), retryAfterSeconds(retry), len(body))
	return append([]byte(head), body...)
}

// Listener wraps ln: its Accept applies the cap.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *ConnLimit
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ll.l.admit(c); lc != nil {
			return lc, nil
		}
		ll.l.refuse(c)
	}
}

// limitedConn is an accepted connection, counted until it closes.
type limitedConn struct {
	net.Conn
	l       *ConnLimit
	el      *list.Element // in l.idle while idle; guarded by l.mu
	fresh   *list.Element // in l.fresh until its first request is read; guarded by l.mu
	evicted bool          // its place went to a newcomer; guarded by l.mu
	once    sync.Once
	// heard is when the connection last read a byte (Unix nanoseconds),
	// or was accepted.
	heard atomic.Int64
}

// Read notes when the client last sent something: net/http reports a
// connection active only once a whole request's headers are in, so a
// client trickling its headers is told from a silent one here.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.heard.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.closed(c) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http (and a hang-up, see
// reqbody) do before the wait that lets a client read its answer; the
// wrapper must pass it on, or they skip it.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// admit counts c in, making room when the cap is reached by closing the
// longest idle connection, else the oldest silent one; nil when every
// connection is busy.
func (l *ConnLimit) admit(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l}
	now := time.Now()
	lc.heard.Store(now.UnixNano())
	l.mu.Lock()
	if l.open < l.max {
		l.open++
		lc.fresh = l.fresh.PushBack(lc)
		l.mu.Unlock()
		l.gauge.Inc()
		return lc
	}
	victim := l.victim(now)
	if victim == nil {
		l.mu.Unlock()
		return nil
	}
	l.forget(victim)
	victim.evicted = true // its place is lc's now
	lc.fresh = l.fresh.PushBack(lc)
	l.mu.Unlock()
	l.evictedTotal.Inc()
	_ = victim.Conn.Close() // net/http's read fails; it then closes the wrapper, which counts nothing more
	return lc
}

// victim is the connection a newcomer at the cap may take the place of:
// the longest idle, else the oldest that has sent nothing for longer than
// l.silent; nil when there is none. l.mu is held.
func (l *ConnLimit) victim(now time.Time) *limitedConn {
	if front := l.idle.Front(); front != nil {
		return front.Value.(*limitedConn)
	}
	quiet := now.Add(-l.silent).UnixNano()
	for e := l.fresh.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*limitedConn); c.heard.Load() < quiet {
			return c
		}
	}
	return nil
}

// forget takes c off the idle and fresh lists. l.mu is held.
func (l *ConnLimit) forget(c *limitedConn) {
	if c.el != nil {
		l.idle.Remove(c.el)
		c.el = nil
		l.idleGauge.Set(float64(l.idle.Len()))
	}
	if c.fresh != nil {
		l.fresh.Remove(c.fresh)
		c.fresh = nil
	}
}

// closed gives up c's place, unless it went to a newcomer already.
func (l *ConnLimit) closed(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(c)
	if !c.evicted {
		l.open--
		l.gauge.Dec()
	}
	c.evicted = true
}

// ConnState is the http.Server's ConnState hook: it keeps the idle list,
// and takes a connection off the fresh one once it has sent a request.
func (l *ConnLimit) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.evicted {
		return
	}
	if st != http.StateNew && c.fresh != nil {
		l.fresh.Remove(c.fresh)
		c.fresh = nil
	}
	switch {
	case st == http.StateIdle && c.el == nil:
		c.el = l.idle.PushBack(c)
	case st != http.StateIdle && c.el != nil:
		l.idle.Remove(c.el)
		c.el = nil
	default:
		return
	}
	l.idleGauge.Set(float64(l.idle.Len()))
}

// refuse answers a connection over the cap with the 503 and closes it,
// in a goroutine of a bounded few (past them, the connection is closed at
// once: under a flood, a close is as fast an answer). The 503 follows the
// client's request headers: an answer before the request would be taken
// for a stray by clients (Go's drops it), and closing on an unread request
// would send a reset that may destroy the answer before it is read.
func (l *ConnLimit) refuse(c net.Conn) {
	l.refusedTotal.Inc()
	select {
	case l.slots <- struct{}{}:
		go func() {
			defer func() { <-l.slots }()
			l.answer(c)
		}()
	default:
		_ = c.Close()
	}
}

func (l *ConnLimit) answer(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if !readHead(c) {
		return
	}
	if _, err := c.Write(l.refusal); err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	// What follows the headers (a body) is read for a moment, for the
	// same reason, and dropped.
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c, 64<<10)
}

// readHead reads up to the end of a request's headers (at most 64 KiB).
func readHead(c net.Conn) bool {
	buf := make([]byte, 4<<10)
	var tail []byte
	for total := 0; total < 64<<10; {
		n, err := c.Read(buf)
		total += n
		tail = append(tail, buf[:n]...)
		if bytes.Contains(tail, []byte("\r\n\r\n")) {
			return true
		}
		if len(tail) > 3 {
			tail = tail[len(tail)-3:]
		}
		if err != nil {
			return false
		}
	}
	return false
}
