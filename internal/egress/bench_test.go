package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/toold/toold/internal/egress/egresstest"
)

// BenchmarkProxy: the proxy's own cost per HTTPS request, a Go client in
// this process side by side with the same client dialing the server
// directly, on loopback, each request on a new connection (a new TLS
// handshake) or on one kept alive. tunnel is CONNECT with the server's
// own TLS end to end; inject terminates TLS at the proxy (the run's
// certificate), adds the header and redacts the response.
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
		conn := "new-connection"
		if keep {
			conn = "kept-alive"
		}
		for _, w := range []struct {
			name  string
			url   string
			proxy func(*http.Request) (*url.URL, error)
		}{
			{"direct", "https://127.0.0.1:" + port + "/", nil},
			{"tunnel", "https://open.test:" + port + "/", proxy},
			{"inject", "https://api.test:" + port + "/", proxy},
		} {
			b.Run(conn+"/"+w.name, func(b *testing.B) {
				cl := &http.Client{Transport: &http.Transport{Proxy: w.proxy, DisableKeepAlives: !keep,
					TLSClientConfig: &tls.Config{RootCAs: roots}}}
				defer cl.CloseIdleConnections()
				for b.Loop() {
					resp, err := cl.Get(w.url)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
}
