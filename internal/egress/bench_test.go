package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toold/toold/internal/egress/egresstest"
)

// BenchmarkProxy: the proxy's own cost per HTTPS request, a Go client in
// this process, each iteration one request directly to the server, one
// through a tunnel (CONNECT, the server's TLS end to end) and one through
// a terminated tunnel (the run's certificate, the header added, the
// response redacted), alternated so the machine's load falls on all three
// alike; each on a new connection (a new TLS handshake, two through the
// proxy) or on one kept alive. It reports each way's median and the
// proxied ways' ratios to direct.
//
//	go test ./internal/egress/ -run '^$' -bench Proxy -benchtime 2000x
func BenchmarkProxy(b *testing.B) {
	ca := egresstest.NewCA(b)
	srv := ca.Server(b, "api.test", "open.test")
	port := strconv.Itoa(srv.Port)
	c, err := Compile(Policy{Allow: []string{"api.test:" + port, "open.test:" + port, "127.0.0.1:" + port}, CAFiles: []string{ca.File},
		Inject:         []Inject{{Host: "api.test", Header: "Authorization", Value: "Bearer 0123456789abcdef"}},
		MaxConnections: 1000000},
		Options{Resolver: egresstest.Resolver(map[string]string{"api.test": "127.0.0.1", "open.test": "127.0.0.1"})})
	if err != nil {
		b.Fatal(err)
	}
	r, err := c.NewRun(context.Background(), RunOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r.Serve(ln)
	b.Cleanup(func() { r.Close() })
	proxy := http.ProxyURL(&url.URL{Scheme: "http", Host: ln.Addr().String()})
	roots := x509Pool(b, r.Bundle())
	for _, keep := range []bool{false, true} {
		name := "new-connection"
		if keep {
			name = "kept-alive"
		}
		b.Run(name, func(b *testing.B) {
			ways := []struct {
				name string
				url  string
				cl   *http.Client
			}{
				{"direct", "https://127.0.0.1:" + port + "/", nil},
				{"tunnel", "https://open.test:" + port + "/", nil},
				{"inject", "https://api.test:" + port + "/", nil},
			}
			for i := range ways {
				p := proxy
				if i == 0 {
					p = nil
				}
				ways[i].cl = &http.Client{Transport: &http.Transport{Proxy: p, DisableKeepAlives: !keep,
					TLSClientConfig: &tls.Config{RootCAs: roots}}}
				defer ways[i].cl.CloseIdleConnections()
			}
			took := make([][]time.Duration, len(ways))
			for b.Loop() {
				for i, w := range ways {
					start := time.Now()
					resp, err := w.cl.Get(w.url)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					took[i] = append(took[i], time.Since(start))
				}
			}
			reportSideBySide(b, []string{"direct", "tunnel", "inject"}, took)
		})
	}
}

// reportSideBySide reports each way's median, in µs, and each later
// way's median over the first's.
func reportSideBySide(b *testing.B, names []string, took [][]time.Duration) {
	med := make([]float64, len(took))
	for i, t := range took {
		slices.Sort(t)
		med[i] = float64(t[len(t)/2].Microseconds())
		b.ReportMetric(med[i], names[i]+"-µs")
	}
	for i := 1; i < len(med); i++ {
		if med[0] > 0 {
			b.ReportMetric(med[i]/med[0], names[i]+"/"+names[0])
		}
	}
	b.ReportMetric(0, "ns/op")
}
