package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/egress/egresstest"
)

// fixture is one run's proxy on loopback, and what the test needs to
// drive it as a program would.
type fixture struct {
	run   *Run
	proxy *url.URL
	reg   *prometheus.Registry
}

// unreadableVault is a vault whose every credential fails to open: what
// a run reaches when it gives no Credentials of its own.
type unreadableVault struct{}

func (unreadableVault) Resolve(context.Context, *auth.Identity, string) ([]byte, error) {
	return nil, errors.New("the test's vault opens nothing")
}

// serve compiles p with names resolved from memory and serves one run.
func serve(t *testing.T, p Policy, names map[string]string, o RunOptions) *fixture {
	t.Helper()
	return serveWith(t, context.Background(), unreadableVault{}, p, names, o)
}

// serveWith is serve with toold's credential vault, for the call ctx.
func serveWith(t *testing.T, ctx context.Context, vault credentials.Resolver, p Policy, names map[string]string, o RunOptions) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := Compile(p, Options{Metrics: NewMetrics(reg), Resolver: egresstest.Resolver(names), Vault: vault})
	if err != nil {
		t.Fatal(err)
	}
	if o.Tool == "" {
		o.Tool = "t"
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	r, err := c.NewRun(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Serve(ln)
	f := &fixture{run: r, proxy: &url.URL{Scheme: "http", Host: ln.Addr().String()}, reg: reg}
	t.Cleanup(func() { r.Close() })
	return f
}

// client is a program of the run: it goes through the proxy and trusts
// roots (the run's bundle, or the test's CA).
func (f *fixture) client(roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.proxy),
		TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
}

// bundlePool is the run's bundle as a pool.
func (f *fixture) bundlePool(t *testing.T) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(f.run.Bundle()) {
		t.Fatal("the run's bundle holds no certificate")
	}
	return p
}

// get fetches u and returns the status and body (status 0 and the error
// text when the request fails).
func get(c *http.Client, u string, header ...string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var hs []string
	for k, vs := range resp.Header {
		hs = append(hs, k+": "+strings.Join(vs, ","))
	}
	return resp.StatusCode, string(b) + "\n" + strings.Join(hs, "\n")
}

// counter is a series of the run's metrics, by name and tool.
func (f *fixture) counter(t *testing.T, name, tool string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == tool {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// x509Pool is a pool of the certificates of a PEM bundle.
func x509Pool(tb testing.TB, pem []byte) *x509.CertPool {
	tb.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		tb.Fatal("no certificate in the bundle")
	}
	return p
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
