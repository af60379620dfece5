package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// The connections of a run's proxy: the client connections it accepts
// (counted against the run's bounds), a hijacked CONNECT's, and the one
// connection of a terminated tunnel served as a listener.

// hijack takes the client connection over, with what its reader
// buffered past the request.
func hijack(w http.ResponseWriter) (net.Conn, io.Reader, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("not hijackable")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	var rd io.Reader = conn
	if n := brw.Reader.Buffered(); n > 0 {
		rd = io.MultiReader(brw.Reader, conn)
	}
	return conn, rd, nil
}

// prefixedConn reads what the server buffered first.
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection when it can.
func (c *prefixedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// oneConn is a listener of one connection, for an http.Server serving a
// terminated tunnel: Accept returns the connection, then waits until the
// server is done with it.
type oneConn struct {
	c    net.Conn
	once sync.Once
	got  bool
	done chan struct{}
	mu   sync.Mutex
}

func newOneConn(c net.Conn) *oneConn { return &oneConn{c: c, done: make(chan struct{})} }

func (o *oneConn) Accept() (net.Conn, error) {
	o.mu.Lock()
	first := !o.got
	o.got = true
	o.mu.Unlock()
	if first {
		return o.c, nil
	}
	<-o.done
	return nil, net.ErrClosed
}

func (o *oneConn) state(_ net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		o.Close()
	}
}

func (o *oneConn) Close() error {
	o.once.Do(func() { close(o.done) })
	return nil
}

func (o *oneConn) Addr() net.Addr { return o.c.LocalAddr() }

// countingListener counts the run's client connections and their bytes,
// and holds at most network.max_connections of them open at once.
type countingListener struct {
	net.Listener
	r *Run
}

func (l *countingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.r.open.Add(1) > int64(l.r.c.maxConns) {
			l.r.open.Add(-1)
			_ = c.Close()
			continue
		}
		return &countingConn{Conn: c, r: l.r}, nil
	}
}

// countingConn adds what moves on a client connection to the run's
// bytes, and ends it when the run passes network.max_bytes.
type countingConn struct {
	net.Conn
	r      *Run
	mu     sync.Mutex
	n      int64
	closed bool
}

func (c *countingConn) add(n int) error {
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	if c.r.bytes.Add(int64(n)) > c.r.c.maxBytes {
		c.r.overBytes()
		_ = c.Conn.Close()
		return errOverBytes
	}
	return nil
}

func (c *countingConn) total() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if aerr := c.add(n); aerr != nil && err == nil {
		err = aerr
	}
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.r.bytes.Load() > c.r.c.maxBytes {
		_ = c.Conn.Close()
		return 0, errOverBytes
	}
	n, err := c.Conn.Write(p)
	if aerr := c.add(n); aerr != nil && err == nil {
		err = aerr
	}
	return n, err
}

func (c *countingConn) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	if first {
		c.r.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite half-closes a tunnel's client side.
func (c *countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// clientConnOf is the run's connection a request came on (nil when the
// server was given another listener).
func clientConnOf(req *http.Request) *countingConn {
	cc, _ := req.Context().Value(connKey{}).(*countingConn)
	return cc
}

type connKey struct{}

// withConn is the server's ConnContext: a request knows its connection.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}
