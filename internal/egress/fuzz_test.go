package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toold/toold/internal/egress/egresstest"
)

// FuzzAllowList: an allow entry and a destination as a run writes them.
// Parsing is stable (what is printed reads back the same), and a rule
// admits a destination only on one of its ports and for a host it names.
func FuzzAllowList(f *testing.F) {
	for _, s := range [][2]string{{"api.github.com", "api.github.com:443"}, {"*.npmjs.org", "registry.npmjs.org:443"},
		{"*.npmjs.org", "npmjs.org:443"}, {"127.0.0.1:8443", "127.0.0.1:8443"}, {"[::1]:8443", "[::1]:8443"},
		{"::1", "[::ffff:127.0.0.1]:443"}, {"API.Test.", "api.test.:80"}, {"a.test", "a.test:0443"},
		{"0x7f.1", "0x7f.1:80"}, {"a.test:65536", "a.test:65535"}, {"[fe80::1%eth0]:1", "[fe80::1%25eth0]:1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, entry, authority string) {
		r, rerr := parseRule(entry, true)
		if rerr == nil {
			again, err := parseRule(r.String(), true)
			if err != nil || again != r {
				t.Fatalf("rule %q prints as %q, which reads as %+v (%v)", entry, r.String(), again, err)
			}
		}
		tg, terr := parseTarget(authority, 443)
		if terr != nil {
			return
		}
		if again, err := parseTarget(tg.String(), 0); err != nil || again != tg {
			t.Fatalf("target %q prints as %q, which reads as %+v (%v)", authority, tg.String(), again, err)
		}
		if rerr != nil || !r.allows(tg) {
			return
		}
		if !slices.Contains(r.ports(), tg.port) {
			t.Fatalf("%q admits %q on a port it does not name", entry, authority)
		}
		switch {
		case r.addr.IsValid() && tg.addr != r.addr,
			!r.addr.IsValid() && tg.addr.IsValid(),
			!r.addr.IsValid() && !r.suffix && tg.host != r.name,
			r.suffix && !strings.HasSuffix(tg.host, "."+r.name):
			t.Fatalf("%q admits %q", entry, authority)
		}
	})
}

// FuzzRedactor: however a response is cut into reads, the redactor
// returns what one pass over the whole of it returns, and no secret.
func FuzzRedactor(f *testing.F) {
	f.Add([]byte("xx Bearer tok-123456 yy tok-123456"), "Bearer tok-123456", uint8(1))
	f.Add([]byte("tok-12tok-123456"), "tok-123456", uint8(3))
	f.Add([]byte("aaaaaaab"), "aab", uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, value string, step uint8) {
		if strings.TrimSpace(value) == "" || len(value) > 200 {
			return
		}
		secrets := secretsOf(value)
		whole := &redactor{secrets: secrets, in: append([]byte(nil), body...)}
		whole.decide(true)
		r := newRedactor(iotest.OneByteReader(bytes.NewReader(body)), secrets)
		if step > 1 {
			r = newRedactor(&chunked{b: body, n: int(step)}, secrets)
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole.out) {
			t.Fatalf("cut in reads: %q, whole: %q", got, whole.out)
		}
		for _, s := range secrets {
			if !strings.ContainsAny(string(s), Redacted) && bytes.Contains(got, s) {
				t.Fatalf("%q survives in %q", s, got)
			}
		}
	})
}

type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// FuzzProxyRequest: whatever a run sends as a request, the proxy answers
// it without panicking, and the only destinations it ever dials are ones
// its allow-list admits, on ports other than toold's.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n",
		"CONNECT evil.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n",
		"CONNECT allowed.test:22 HTTP/1.1\r\n\r\n",
		"CONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n",
		"GET http://allowed.test/x HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"GET http://evil.test@allowed.test/ HTTP/1.1\r\n\r\n",
		"GET http://allowed.test:9/ HTTP/1.1\r\n\r\n",
		"GET https://allowed.test/ HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	c, err := Compile(Policy{Allow: []string{"allowed.test", "allowed.test:9", "192.0.2.7:8080"}},
		Options{Resolver: egresstest.Resolver(map[string]string{"allowed.test": "192.0.2.1"})})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		var dialed []string
		cc := *c
		cc.dialHook = func(addr string) error {
			dialed = append(dialed, addr)
			return errors.New("the fuzz test dials nothing")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, err := cc.NewRun(ctx, RunOptions{DenyPorts: []int{9}})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req.WithContext(ctx))
		r.Close()
		for _, a := range dialed {
			tg, err := parseTarget(a, 0)
			if err != nil || cc.decide(tg) != "" || tg.port == 9 {
				t.Fatalf("%q made the proxy dial %q", raw, a)
			}
		}
		if w.Code == http.StatusOK && req.Method != http.MethodConnect {
			t.Fatalf("%q: 200 without reaching anything", raw)
		}
	})
}
