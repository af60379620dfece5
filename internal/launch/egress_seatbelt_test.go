package launch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/egress/egresstest"
)

// TestSeatbeltProxy: a Mac run's egress proxy, as openNet makes it (the
// same code on every OS; only sandbox-exec is the Mac's): it listens on
// toold's loopback at the port the run's profile allows, it serves only
// requests carrying the run's proxy credentials (other programs of the
// Mac reach that port too), it injects the header with the bundle the run
// is given, and it ends with the run.
func TestSeatbeltProxy(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	l := targetLauncher(t, darwinRlimits, macPrivate)
	l.cfg.Egress = egress.Options{Resolver: egresstest.Resolver(map[string]string{"api.test": "127.0.0.1"})}
	s := shape{name: "allow_list", argv: []string{"curl"}, sandbox: Sandbox{Network: AllowList(egress.Policy{
		Allow:   []string{"api.test:" + port, "127.0.0.1:" + port},
		Inject:  []egress.Inject{{Host: "api.test", Header: "Authorization", Value: "Bearer seatbelt-secret"}},
		CAFiles: []string{ca.File}})}}
	sb := s.built(t, l, ModeSeatbelt)
	n, err := l.openNet(context.Background(), sb, RunNet{Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	run := sb.withNet(n)
	if p := run.seatbeltPolicy("/usr/bin/curl", macWorkspace, macTmp, func(p string) string { return p }, nil); p.Proxy != n.port || p.Proxy == proxyPort {
		t.Fatalf("the profile allows port %d, the proxy listens on %d", p.Proxy, n.port)
	}
	env := map[string]string{}
	for _, kv := range n.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	proxy, err := url.Parse(env["HTTPS_PROXY"])
	if err != nil || proxy.Host != "127.0.0.1:"+strconv.Itoa(n.port) || proxy.User == nil {
		t.Fatalf("HTTPS_PROXY=%q", env["HTTPS_PROXY"])
	}
	if env["SSL_CERT_FILE"] != n.bundle || filepath.Dir(n.bundle) != n.dir {
		t.Fatalf("SSL_CERT_FILE=%q, bundle %q", env["SSL_CERT_FILE"], n.bundle)
	}
	pem, err := os.ReadFile(n.bundle)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	fetch := func(p *url.URL) (int, string) {
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(p), TLSClientConfig: &tls.Config{RootCAs: roots},
			DisableKeepAlives: true}}
		resp, err := c.Get("https://api.test:" + port + "/")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stranger := *proxy
	stranger.User = url.UserPassword("toold", "not-the-run")
	for _, p := range []*url.URL{{Scheme: "http", Host: proxy.Host}, &stranger} {
		if code, body := fetch(p); code != 0 || !strings.Contains(body, "Proxy Authentication Required") {
			t.Errorf("another program of the Mac (%s): %d %s", p.Redacted(), code, body)
		}
	}
	code, body := fetch(proxy)
	var seen egresstest.Seen
	if code != http.StatusOK || json.Unmarshal([]byte(body), &seen) != nil {
		t.Fatalf("the run: %d %s", code, body)
	}
	if got := srv.Seen(); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer seatbelt-secret" ||
		got[0].Header.Get("Proxy-Authorization") != "" {
		t.Errorf("the server saw %+v", got)
	}
	if strings.Contains(body, "seatbelt-secret") || strings.Contains(strings.Join(n.env, " "), "seatbelt-secret") {
		t.Errorf("the secret reached the run: %s %q", body, n.env)
	}
	n.close()
	if c, err := net.Dial("tcp", proxy.Host); err == nil {
		_ = c.Close()
		t.Error("the proxy still listens after the run")
	}
	if _, err := os.Stat(n.dir); !os.IsNotExist(err) {
		t.Errorf("the bundle's directory outlived the run: %v", err)
	}
}
