package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"time"
)

// conn is a minimal HTTP/1.1 keep-alive client on one TCP connection. The
// generator must cost far less CPU than the servers it measures; net/http's
// client costs about as much per request as a small server does, so this
// writes a prebuilt request and parses only the status line, Content-Length
// and Retry-After.
type conn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	body []byte
}

type reply struct {
	status     int
	retryAfter bool
	location   string
	body       []byte // valid until the next call
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{addr: addr, c: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

// request builds a POST with a JSON body.
func request(host, path string, body []byte) []byte {
	return requestWith("POST", host, path, body)
}

// requestWith builds a request with extra header lines ("Name: value").
func requestWith(method, host, path string, body []byte, headers ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, host)
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Type: application/json\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	return b.Bytes()
}

// do sends req and reads one response.
func (c *conn) do(req []byte, deadline time.Time) (reply, error) {
	_ = c.c.SetDeadline(deadline)
	if _, err := c.c.Write(req); err != nil {
		return reply{}, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return reply{}, fmt.Errorf("bad status line %q", line)
	}
	var rep reply
	if rep.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return reply{}, err
	}
	length, chunked := -1, false
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return reply{}, err
		}
		if len(h) <= 2 {
			break
		}
		name, value, _ := bytes.Cut(h, []byte(":"))
		switch {
		case asciiEqualFold(name, "Content-Length"):
			length, _ = strconv.Atoi(string(bytes.TrimSpace(value)))
		case asciiEqualFold(name, "Retry-After"):
			rep.retryAfter = true
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = bytes.Contains(value, []byte("chunked"))
		case asciiEqualFold(name, "Location"):
			rep.location = string(bytes.TrimSpace(value))
		}
	}
	if chunked {
		// An event stream (MCP's Streamable HTTP answers one this way).
		body, err := io.ReadAll(httputil.NewChunkedReader(c.r))
		if err != nil {
			return reply{}, err
		}
		if _, err := c.r.Discard(2); err != nil { // the CRLF after the last chunk
			return reply{}, err
		}
		rep.body = body
		return rep, nil
	}
	if length < 0 {
		return reply{}, errors.New("response without Content-Length")
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		return reply{}, err
	}
	rep.body = c.body
	return rep, nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i]|0x20, s[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

func (c *conn) close() { _ = c.c.Close() }
