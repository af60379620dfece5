package server

import (
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
