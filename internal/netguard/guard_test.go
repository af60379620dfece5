package netguard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func okServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hop":
			http.Redirect(w, r, "/ok", http.StatusFound)
			return
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, c *http.Client, u string) (string, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

// TestAllowListAdmits: what the allow-list names is reached — by address,
// by prefix, by name — and nothing more.
func TestAllowListAdmits(t *testing.T) {
	srv := okServer(t)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	dns := startDNS(t, map[string][]string{"api.internal": {"127.0.0.1"}, "other.internal": {"127.0.0.1"}})
	tests := []struct {
		allow []string
		url   string
		ok    bool
	}{
		{[]string{"127.0.0.1"}, srv.URL + "/", true},
		{[]string{"127.0.0.0/8"}, srv.URL + "/", true},
		{[]string{"[::ffff:127.0.0.1]"}, srv.URL + "/", true},
		{[]string{"api.internal"}, "http://api.internal:" + port + "/", true},
		{[]string{"API.Internal."}, "http://api.internal.:" + port + "/", true},
		{[]string{"api.internal"}, "http://other.internal:" + port + "/", false},
		{[]string{"api.internal"}, srv.URL + "/", false},
		{[]string{"10.0.0.0/8"}, srv.URL + "/", false},
		{[]string{"127.0.0.1"}, srv.URL + "/hop", true},
	}
	for _, tt := range tests {
		g := newGuard(t, Policy{Allow: tt.allow, AllowHTTP: true, Resolver: dns.resolver()}, &firewall{})
		body, err := get(t, testClient(g), tt.url)
		if tt.ok && (err != nil || body != "ok") {
			t.Errorf("allow %v, %s: %q %v", tt.allow, tt.url, body, err)
		}
		if !tt.ok && !errors.Is(err, ErrRefused) {
			t.Errorf("allow %v, %s: %q %v, want a refusal", tt.allow, tt.url, body, err)
		}
	}
}

// TestMetadataNeedsItsExactAddress: a prefix that contains a metadata
// address does not admit it; naming the address does (the test firewall
// then stops the connection off loopback, after the guard passed it).
func TestMetadataNeedsItsExactAddress(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		allow, addr string
		ok          bool
	}{
		{"169.254.0.0/16", "169.254.169.254:80", false},
		{"0.0.0.0/0", "169.254.169.254:80", false},
		{"169.254.169.254", "169.254.169.254:80", true},
		{"169.254.169.254", "[fd00:ec2::254]:80", false},
		{"fd00::/8", "[fd00:ec2::254]:80", false},
		{"fd00:ec2::254", "[fd00:ec2::254]:80", true},
	} {
		fw := &firewall{}
		g := newGuard(t, Policy{Allow: []string{tt.allow}}, fw)
		_, err := g.DialContext(ctx, "tcp", tt.addr)
		passed := len(fw.offLoopback()) == 1
		if errors.Is(err, ErrRefused) == tt.ok || passed != tt.ok {
			t.Errorf("allow %s, dial %s: %v (firewall saw %v)", tt.allow, tt.addr, err, fw.offLoopback())
		}
	}
}

// TestSchemesAndRedirects: https only by default; every hop of a redirect is
// checked, a downgrade to http included; a loop ends after five.
func TestSchemesAndRedirects(t *testing.T) {
	g := newGuard(t, Policy{}, &firewall{})
	for _, raw := range []string{"http://example.com/", "ws://example.com/", "HTTPS://user@example.com/", "https:opaque", "https://example.com:99999/"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.CheckURL(u); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v", raw, err)
		}
	}
	if err := g.CheckURL(&url.URL{Scheme: "https", Host: "example.com"}); err != nil {
		t.Errorf("https://example.com: %v", err)
	}
	from := &http.Request{URL: &url.URL{Scheme: "https", Host: "example.com", Path: "/a"}}
	down := &http.Request{URL: &url.URL{Scheme: "http", Host: "example.com", Path: "/b"}}
	if err := g.CheckRedirect(down, []*http.Request{from}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "redirect from") {
		t.Errorf("downgrade: %v", err)
	}
	srv := okServer(t)
	loop := newGuard(t, Policy{Allow: []string{"127.0.0.1"}, AllowHTTP: true}, &firewall{})
	if _, err := get(t, testClient(loop), srv.URL+"/loop"); !errors.Is(err, ErrRefused) ||
		!strings.Contains(err.Error(), "more than 5 redirects") {
		t.Errorf("redirect loop: %v", err)
	}
}

func TestNewRefusesBadPolicy(t *testing.T) {
	for _, p := range []Policy{
		{Allow: []string{"not a host"}},
		{Allow: []string{"exa mple.com"}},
		{Allow: []string{"10.0.0.0/33"}},
		{Proxy: "socks5://127.0.0.1:1080"},
		{Proxy: "http://"},
	} {
		if _, err := New(p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

// TestNumericHost holds the non-standard IPv4 detector to inet_aton's
// reading: every form it accepts is caught, and ordinary names are not.
func TestNumericHost(t *testing.T) {
	for _, h := range []string{"2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1", "1.2.3.4.5", "0x", "example.0x1f"} {
		if !NumericHost(h) {
			t.Errorf("%s not caught", h)
		}
	}
	for _, h := range []string{"example.com", "1password.com", "a.b.c.d1", "api-2.internal", "0xdeadbeef.example"} {
		if NumericHost(h) {
			t.Errorf("%s caught", h)
		}
	}
}

// FuzzCheckURL: no URL makes CheckURL panic, and none it passes has a host
// that is a refused address or that inet_aton would read as an address.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://example.com/", "http://2130706433/", "https://[::ffff:127.0.0.1]/",
		"https://0x7f.1/", "https://a@b/", "https://localhost./", "https://169.254.169.254/", "https://1.1.1.1:443/x"} {
		f.Add(s)
	}
	g, err := New(Policy{AllowHTTP: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil || g.CheckURL(u) != nil {
			return
		}
		host := u.Hostname()
		if ip, err := netip.ParseAddr(host); err == nil {
			if g.checkAddr(host, "", ip) != nil {
				t.Fatalf("%q passed with refused address %s", raw, ip)
			}
			return
		}
		if _, ok := inetAton(host); ok {
			t.Fatalf("%q passed, but inet_aton reads %q as an address", raw, host)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
			t.Fatalf("%q passed", raw)
		}
	})
}

// inetAton is glibc's reading of an IPv4 address: one to four parts, each
// decimal, octal (leading 0) or hex (0x), a trailing dot tolerated.
func inetAton(s string) (uint32, bool) {
	s = strings.TrimSuffix(s, ".")
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return 0, false
	}
	var vals []uint64
	for _, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(strings.ToLower(p), "0x"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if p == "" {
			return 0, false
		}
		var v uint64
		for _, c := range strings.ToLower(digits) {
			d := strings.IndexRune("0123456789abcdef", c)
			if d < 0 || d >= base {
				return 0, false
			}
			v = v*uint64(base) + uint64(d)
			if v > 1<<32 {
				return 0, false
			}
		}
		vals = append(vals, v)
	}
	return 0, len(vals) > 0
}
