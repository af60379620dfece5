package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestSSRFRefusedWithoutConnecting: every way of naming this host, the
// private network or a metadata service — directly or through a redirect
// from an allowed server — is refused, and the loopback listener the
// request would have reached accepts nothing. Names resolve through a DNS
// server the test runs; a firewall behind the guard stops anything off
// loopback, so a guard that let a case through would show there too.
func TestSSRFRefusedWithoutConnecting(t *testing.T) {
	ctr := listenCounter(t)
	p := ctr.port
	dns := startDNS(t, map[string][]string{
		"redirector.test":     {"127.0.0.1"},
		"allowed.test":        {"127.0.0.1"},
		"loopback.test":       {"127.0.0.1"},
		"private.test":        {"10.1.2.3"},
		"mapped.test":         {"::ffff:127.0.0.1"},
		"v6loop.test":         {"::1"},
		"metadata-alias.test": {"169.254.169.254"},
		"mixed.test":          {"8.8.8.8,127.0.0.1"},
		"cgnat.test":          {"100.64.1.1"},
		"nat64.test":          {"64:ff9b::7f00:1"},
	})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	_, rport, _ := net.SplitHostPort(redirector.Listener.Addr().String())
	via := func(target string) string {
		return "http://redirector.test:" + rport + "/to?u=" + url.QueryEscape(target)
	}
	direct := []struct{ name, url string }{
		{"loopback", "http://127.0.0.1:" + p + "/"},
		{"loopback elsewhere in 127/8", "http://127.0.0.2:" + p + "/"},
		{"decimal", "http://2130706433:" + p + "/"},
		{"octal", "http://0177.0.0.1:" + p + "/"},
		{"hex", "http://0x7f.0.0.1:" + p + "/"},
		{"hex whole", "http://0x7f000001:" + p + "/"},
		{"short form", "http://127.1:" + p + "/"},
		{"unspecified", "http://0.0.0.0:" + p + "/"},
		{"unspecified v6", "http://[::]:" + p + "/"},
		{"loopback v6", "http://[::1]:" + p + "/"},
		{"v4-mapped dotted", "http://[::ffff:127.0.0.1]:" + p + "/"},
		{"v4-mapped hex", "http://[::ffff:7f00:1]:" + p + "/"},
		{"v4-compatible", "http://[::127.0.0.1]:" + p + "/"},
		{"localhost", "http://localhost:" + p + "/"},
		{"localhost trailing dot", "http://localhost.:" + p + "/"},
		{"localhost subdomain", "http://api.localhost:" + p + "/"},
		{"address trailing dot", "http://127.0.0.1.:" + p + "/"},
		{"6to4 of loopback", "http://[2002:7f00:1::]:" + p + "/"},
		{"6to4 of private", "http://[2002:a00:1::1]:" + p + "/"},
		{"NAT64 of loopback", "http://[64:ff9b::7f00:1]:" + p + "/"},
		{"NAT64 of private", "http://[64:ff9b::c0a8:101]:" + p + "/"},
		{"private 10/8", "http://10.0.0.1:" + p + "/"},
		{"private 172.16/12", "http://172.16.5.4:" + p + "/"},
		{"private 192.168/16", "http://192.168.1.1:" + p + "/"},
		{"CGNAT", "http://100.64.0.1:" + p + "/"},
		{"link-local", "http://169.254.10.10:" + p + "/"},
		{"link-local v6", "http://[fe80::1]:" + p + "/"},
		{"unique local v6", "http://[fd12:3456::1]:" + p + "/"},
		{"multicast", "http://224.0.0.1:" + p + "/"},
		{"multicast v6", "http://[ff02::1]:" + p + "/"},
		{"metadata", "http://169.254.169.254/latest/meta-data/"},
		{"metadata v6", "http://[fd00:ec2::254]/latest/meta-data/"},
		{"metadata v4-mapped", "http://[::ffff:169.254.169.254]/latest/meta-data/"},
		{"metadata name", "http://metadata.google.internal/computeMetadata/v1/"},
		{"metadata name trailing dot", "http://metadata.google.internal./computeMetadata/v1/"},
		{"userinfo naming an allowed host", "http://allowed.test@127.0.0.1:" + p + "/"},
		{"userinfo with password", "http://allowed.test:x@127.0.0.1:" + p + "/"},
		{"name resolving to loopback", "http://loopback.test:" + p + "/"},
		{"name resolving to private", "http://private.test:" + p + "/"},
		{"name resolving to v4-mapped loopback", "http://mapped.test:" + p + "/"},
		{"name resolving to v6 loopback", "http://v6loop.test:" + p + "/"},
		{"name resolving to metadata", "http://metadata-alias.test/latest/meta-data/"},
		{"name resolving to CGNAT", "http://cgnat.test:" + p + "/"},
		{"name resolving to NAT64 loopback", "http://nat64.test:" + p + "/"},
		{"answer public then private", "http://mixed.test:" + p + "/"},
		{"scheme file", "file:///etc/passwd"},
		{"scheme ftp", "ftp://127.0.0.1:" + p + "/"},
		{"scheme gopher", "gopher://127.0.0.1:" + p + "/_x"},
	}
	type testCase struct{ name, url string }
	var cases []testCase
	for _, c := range direct {
		cases = append(cases, testCase(c))
		if !strings.HasPrefix(c.name, "userinfo") { // a redirect's Location carries no userinfo worth testing twice
			cases = append(cases, testCase{"redirect to " + c.name, via(c.url)})
		}
	}
	cases = append(cases, testCase{"redirect loop", "http://redirector.test:" + rport + "/loop"})
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	fw := &firewall{}
	g := newGuard(t, Policy{Allow: []string{"redirector.test", "allowed.test"}, AllowHTTP: true,
		Resolver: dns.resolver()}, fw)
	client := testClient(g)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := client.Get(c.url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("%s: fetched (%d)", c.url, resp.StatusCode)
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("%s: %v, want a refusal by the guard", c.url, err)
			}
			if n := ctr.n.Load(); n != 0 {
				t.Fatalf("%s: the loopback listener accepted %d connection(s)", c.url, n)
			}
			if off := fw.offLoopback(); len(off) > 0 {
				t.Fatalf("%s: the guard let %v through", c.url, off)
			}
		})
	}
}

// TestRebindingBetweenDials: a name whose answer is public for one dial and
// loopback for the next is refused the second time. The check is on each
// dial's own answer, at the socket, so nothing checked earlier is trusted.
func TestRebindingBetweenDials(t *testing.T) {
	ctr := listenCounter(t)
	dns := startDNS(t, map[string][]string{"rebind.test": {"8.8.8.8", "127.0.0.1"}})
	fw := &firewall{}
	g := newGuard(t, Policy{Resolver: dns.resolver()}, fw)
	ctx := context.Background()
	addr := "rebind.test:" + ctr.port
	if _, err := g.DialContext(ctx, "tcp", addr); err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("first dial (public answer): %v, want the guard to pass it and the test firewall to stop it", err)
	}
	if off := fw.offLoopback(); len(off) != 1 || off[0].Addr().String() != "8.8.8.8" {
		t.Fatalf("the firewall saw %v, want 8.8.8.8", off)
	}
	if _, err := g.DialContext(ctx, "tcp", addr); !errors.Is(err, ErrRefused) {
		t.Fatalf("second dial (loopback answer): %v, want a refusal", err)
	}
	if n := ctr.n.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connection(s)", n)
	}
}

// TestProxyEnvironmentIgnored: with HTTP_PROXY and friends pointing at a
// listener, a request still goes straight to its destination (here stopped
// by the test firewall off loopback), and the would-be proxy sees nothing.
func TestProxyEnvironmentIgnored(t *testing.T) {
	proxy := listenCounter(t)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, "http://127.0.0.1:"+proxy.port)
	}
	t.Setenv("NO_PROXY", "")
	dns := startDNS(t, map[string][]string{"public.test": {"8.8.8.8"}})
	fw := &firewall{}
	g := newGuard(t, Policy{Allow: []string{"127.0.0.1"}, AllowHTTP: true, Resolver: dns.resolver()}, fw)
	client := testClient(g)
	if resp, err := client.Get("http://public.test/x"); err == nil {
		resp.Body.Close()
		t.Fatal("fetched through something")
	}
	if off := fw.offLoopback(); len(off) != 1 || off[0].String() != "8.8.8.8:80" {
		t.Fatalf("the request did not go straight to its destination: firewall saw %v", off)
	}
	// A refused destination with the proxy allowed and in the environment.
	if resp, err := client.Get("http://169.254.169.254/latest/meta-data/"); !errors.Is(err, ErrRefused) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("metadata: %v", err)
	}
	if n := proxy.n.Load(); n != 0 {
		t.Fatalf("the environment's proxy got %d connection(s)", n)
	}
}

// TestConfiguredProxy: a proxy the policy names is used, and a destination
// the guard refuses never reaches it.
func TestConfiguredProxy(t *testing.T) {
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.RequestURI)
		io.WriteString(w, "via proxy")
	}))
	t.Cleanup(proxy.Close)
	dns := startDNS(t, map[string][]string{"public.test": {"8.8.8.8"}, "private.test": {"10.9.8.7"}})
	g := newGuard(t, Policy{Proxy: proxy.URL, AllowHTTP: true, Resolver: dns.resolver()}, &firewall{})
	client := testClient(g)
	resp, err := client.Get("http://public.test/x?y=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "via proxy" || len(seen) != 1 || seen[0] != "GET http://public.test/x?y=1" {
		t.Fatalf("body %q, proxy saw %v", body, seen)
	}
	if _, err := client.Get("http://private.test/"); !errors.Is(err, ErrRefused) {
		t.Fatalf("private through the proxy: %v", err)
	}
	if len(seen) != 1 {
		t.Fatalf("the proxy saw a refused request: %v", seen)
	}
}
