package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestConnLimitUnderChurn: many clients, keep-alive and not, through a
// cap of 3: every request is served or refused with the 503 (none hangs),
// the count of open connections never passes the cap, and it comes back
// to zero when the clients are gone.
func TestConnLimitUnderChurn(t *testing.T) {
	l := NewConnLimit(3, prometheus.NewRegistry())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var peak int
	var mu sync.Mutex
	srv := &http.Server{ConnState: l.ConnState, ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		mu.Lock()
		peak = max(peak, l.open)
		mu.Unlock()
		l.mu.Unlock()
		time.Sleep(time.Millisecond)
		io.WriteString(w, "ok")
	})}
	go srv.Serve(l.Listener(ln))
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	var wg sync.WaitGroup
	var served, refused, failed sync.Map // by [client, request]
	for i := range 12 {
		wg.Go(func() {
			tr := &http.Transport{DisableKeepAlives: i%3 == 0}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for j := range 20 {
				resp, err := c.Get(url)
				if err != nil {
					failed.Store([2]int{i, j}, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					served.Store([2]int{i, j}, true)
				case 503:
					refused.Store([2]int{i, j}, true)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	served.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Fatal("nothing was served")
	}
	if peak > 3 {
		t.Errorf("%d connections open at once, cap 3", peak)
	}
	// A GET sent on a keep-alive connection as it is evicted is retried by
	// the client, as after any server's idle close: none may fail.
	failed.Range(func(k, v any) bool { t.Errorf("request %v: %v", k, v); return true })
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(l.gauge) != 0 || testutil.ToFloat64(l.idleGauge) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%v connections (%v idle) still counted after the clients left",
				testutil.ToFloat64(l.gauge), testutil.ToFloat64(l.idleGauge))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConnLimitEvictsSilent (issue 24, finding 10): at a cap of 4, four
// connections that send nothing no longer lock a newcomer out until
// read_header_timeout (a minute here): once they have been silent for
// SilentAfter, a newcomer takes the place of the oldest, and is served. A
// newcomer before that is refused (a client that has just dialled is not
// silent yet), and a client that has sent part of its request within the
// second keeps its place.
func TestConnLimitEvictsSilent(t *testing.T) {
	l := NewConnLimit(4, prometheus.NewRegistry())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnState: l.ConnState, ReadHeaderTimeout: time.Minute,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(l.Listener(ln))
	defer srv.Close()
	addr := ln.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func() int {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	silent := make([]net.Conn, 3)
	for i := range silent {
		silent[i] = dial()
	}
	trickle := dial()
	dialled := time.Now()
	// A client sending its headers a line at a time is not silent.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second / 4) // SilentAfter/4
		defer tick.Stop()
		trickle.Write([]byte("GET / HTTP/1.1\r\n"))
		for {
			select {
			case <-stop:
				trickle.Write([]byte("Host: x\r\n\r\n"))
				return
			case <-tick.C:
				trickle.Write([]byte("X-Slow: 1\r\n"))
			}
		}
	})
	waitOpen(t, l, 4)
	if code := get(); code != http.StatusServiceUnavailable && time.Since(dialled) < time.Second/2 {
		t.Fatalf("a newcomer while four connections have just dialled: %d, want 503", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for get() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("silent connections kept every newcomer out for 10 s (read_header_timeout is a minute)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	silent[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent[0].Read(make([]byte, 1)); err == nil {
		t.Error("the oldest silent connection was not the one closed")
	}
	trickle.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(trickle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the client that was sending its request lost its place: %v %v", resp, err)
	}
	if n := testutil.ToFloat64(l.evictedTotal); n < 1 {
		t.Errorf("evictions counted: %v", n)
	}
}

// waitOpen waits (5 s at most) until l counts n open connections.
func waitOpen(t *testing.T, l *ConnLimit, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(l.gauge) != float64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%v connections open, want %d", testutil.ToFloat64(l.gauge), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
