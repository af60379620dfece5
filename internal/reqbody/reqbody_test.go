package reqbody

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// served is a real HTTP server on loopback whose handler reads each body
// with rd and reports what happened; hold keeps a read body until the test
// lets it go.
type served struct {
	addr    string
	results chan result
	hold    chan struct{}
}

type result struct {
	n      int
	reason string
}

// listen serves h on loopback until the test ends and dials it once: the
// raw connection lets a test send a request as slowly or as partly as it
// likes.
func listen(t *testing.T, h http.HandlerFunc) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func serve(t *testing.T, rd *Reader) *served {
	t.Helper()
	s := &served{results: make(chan result, 16), hold: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := rd.Read(w, r, time.Time{})
		var e *Error
		if errors.As(err, &e) {
			s.results <- result{reason: e.Reason}
			w.WriteHeader(400)
			return
		}
		s.results <- result{n: len(b.Data)}
		if r.Header.Get("Hold") != "" {
			<-s.hold
		}
		b.Release()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(s.hold); srv.Close() })
	s.addr = ln.Addr().String()
	return s
}

// send writes a raw request: head is the request line's path and the
// header lines after Host; body is written as given (chunked or not).
func (s *served) send(t *testing.T, header, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\n%s\r\n%s", header, body)
	go io.Copy(io.Discard, bufio.NewReader(c))
	return c
}

func (s *served) next(t *testing.T) result {
	t.Helper()
	select {
	case r := <-s.results:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not finish reading")
		return result{}
	}
}

func chunked(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	return b.String() + "0\r\n\r\n"
}

func TestRead(t *testing.T) {
	big := strings.Repeat("a", 3000)
	tests := []struct {
		name, header, body string
		want               result
	}{
		{"announced", "Content-Length: 5\r\n", "hello", result{n: 5}},
		{"empty", "Content-Length: 0\r\n", "", result{}},
		{"announced too large", "Content-Length: 1025\r\n", "", result{reason: ReasonTooLarge}},
		{"chunked", "Transfer-Encoding: chunked\r\n", chunked("hel", "lo"), result{n: 5}},
		{"chunked at the cap", "Transfer-Encoding: chunked\r\n", chunked(big[:1024]), result{n: 1024}},
		{"chunked past the cap", "Transfer-Encoding: chunked\r\n", chunked(big[:1000], big[:25]), result{reason: ReasonTooLarge}},
		{"stalled", "Content-Length: 100\r\n", "only this", result{reason: ReasonTimeout}},
		{"stalled chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n", result{reason: ReasonTimeout}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rd := New(Options{MaxBytes: 1024, Budget: 1 << 20, Timeout: 200 * time.Millisecond, Registerer: reg})
			s := serve(t, rd)
			s.send(t, tc.header, tc.body)
			if got := s.next(t); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.want.reason != "" && testutil.ToFloat64(rd.refused.WithLabelValues(tc.want.reason)) != 1 {
				t.Errorf("the refusal was not counted")
			}
			waitHeld(t, rd, 0)
		})
	}
}

func waitHeld(t *testing.T, rd *Reader, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rd.held.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes held, want %d", rd.held.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if g := testutil.ToFloat64(rd.heldGauge); g != float64(want) {
		t.Fatalf("the gauge says %v bytes held, want %d", g, want)
	}
}

// TestBudget: an announced body reserves its length before a byte is
// read, a chunked one grows its reservation as it arrives, and a body that
// does not fit is refused at once; the budget comes back on Release.
func TestBudget(t *testing.T) {
	rd := New(Options{MaxBytes: 8 << 10, Budget: 10 << 10, Timeout: 5 * time.Second})
	s := serve(t, rd)
	s.send(t, "Hold: 1\r\nContent-Length: 8192\r\n", strings.Repeat("a", 8192))
	if got := s.next(t); got.n != 8192 {
		t.Fatalf("the first body: %+v", got)
	}
	waitHeld(t, rd, 8<<10)
	s.send(t, "Content-Length: 4096\r\n", "") // announced, not sent: refused before reading
	if got := s.next(t); got.reason != ReasonBudget {
		t.Fatalf("a body past the budget: %+v", got)
	}
	s.send(t, "Transfer-Encoding: chunked\r\n", chunked(strings.Repeat("b", 5000))) // grows past the budget
	if got := s.next(t); got.reason != ReasonBudget {
		t.Fatalf("a chunked body past the budget: %+v", got)
	}
	waitHeld(t, rd, 8<<10)
	s.hold <- struct{}{}
	waitHeld(t, rd, 0)
	s.send(t, "Content-Length: 4096\r\n", strings.Repeat("c", 4096))
	if got := s.next(t); got.n != 4096 {
		t.Fatalf("once the budget came back: %+v", got)
	}
}

// TestDeadlineOfTheCall: a deadline earlier than the timeout cuts the read
// there.
func TestDeadlineOfTheCall(t *testing.T) {
	rd := New(Options{Timeout: time.Minute})
	took := make(chan time.Duration, 1)
	c := listen(t, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, err := rd.Read(w, r, start.Add(200*time.Millisecond))
		if e, ok := errors.AsType[*Error](err); !ok || e.Reason != ReasonTimeout {
			t.Errorf("got %v, want a timeout", err)
		}
		took <- time.Since(start)
	})
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
	select {
	case d := <-took:
		if d > 20*time.Second {
			t.Errorf("cut after %v", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read was not cut at the call's deadline")
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		o           Options
		max, budget int64
	}{
		{Options{}, DefaultMaxBytes, DefaultBudgetBodies * DefaultMaxBytes},
		{Options{MaxBytes: 64 << 20}, 64 << 20, DefaultBudgetBodies * 64 << 20},
		{Options{MaxBytes: 64 << 20, Budget: 1 << 20}, 64 << 20, 64 << 20}, // one body of the largest size must fit
	} {
		rd := New(tc.o)
		if rd.MaxBytes() != tc.max || rd.budget != tc.budget || rd.Timeout() != DefaultTimeout {
			t.Errorf("%+v: max %d, budget %d, timeout %v", tc.o, rd.MaxBytes(), rd.budget, rd.Timeout())
		}
	}
}

// TestHangUp: a request refused with its body unread gets the whole
// answer and then the end of the stream (a half-close); the handler is not
// held for the linger before the full close, which here lasts an hour.
func TestHangUp(t *testing.T) {
	rd := New(Options{})
	rd.reaper.delay = time.Hour
	returned := make(chan struct{})
	c := listen(t, func(w http.ResponseWriter, r *http.Request) {
		if !Unread(r) {
			t.Error("a body announced and unread is not Unread")
		}
		w.Header().Set("Retry-After", "1")
		if !rd.HangUp(w, 503, []byte(`{"refused":true}`)) {
			t.Error("HangUp could not take the connection over")
		}
		close(returned)
	})
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 2<<20, strings.Repeat("a", 64<<10))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !resp.Close || resp.Header.Get("Retry-After") != "1" || string(body) != `{"refused":true}` {
		t.Errorf("got %d close=%v %v %s", resp.StatusCode, resp.Close, resp.Header, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want EOF", err)
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler is held by the linger")
	}
	rd.reaper.mu.Lock()
	defer rd.reaper.mu.Unlock()
	if len(rd.reaper.queue) != 1 {
		t.Errorf("%d connections wait for their close, want 1", len(rd.reaper.queue))
	}
}
