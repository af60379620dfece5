package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/console"
)

// rawDo is one request without the contract checker: the console's
// assets are not API operations.
func (h *harness) rawDo(method, path, body string, header map[string]string) (int, http.Header, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestConsoleMounted: the console is served at /console/ with its CSP,
// behind the API's Origin and Host checks; an unknown asset is answered
// with the API's envelope.
func TestConsoleMounted(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		status             int
		says               string
	}{
		{"the page", "GET", "/console/", nil, 200, `<script type="module" src="app.js">`},
		{"a module", "GET", "/console/approvals.js", nil, 200, "/approvals"},
		{"the bare path", "GET", "/console", nil, 301, ""},
		{"no such asset", "GET", "/console/nope.js", nil, 404, `"no_route"`},
		{"a foreign origin", "GET", "/console/", map[string]string{"Origin": "https://evil.example"}, 403, "origin_not_allowed"},
		{"a rebound host", "GET", "/console/", map[string]string{"Host": "attacker.example:8080"}, 403, "host_not_allowed"},
		{"a post", "POST", "/console/", nil, 405, "method_not_allowed"},
	} {
		status, header, body := h.rawDo(c.method, c.path, "", c.header)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %.300s", c.name, status, body)
		}
		if status == 200 && header.Get("Content-Security-Policy") != console.CSP {
			t.Errorf("%s: CSP %q", c.name, header.Get("Content-Security-Policy"))
		}
	}
}

// TestSameOriginPOST: a browser sends Origin on a page's POSTs even to its
// own origin, so the console's decisions and answers came with an Origin
// naming toold itself; that is not a foreign origin. A page reaching toold
// under another name (DNS rebinding) is same-origin too, and is stopped
// by the Host check when there are no keys, or by the key it lacks.
func TestSameOriginPOST(t *testing.T) {
	open := newHarness(t, harnessOpts{})
	keyed := newHarness(t, harnessOpts{keys: []auth.Key{{Name: "agent", SHA256: auth.Hash("toold_same_origin_test_key_000001"), Tools: []string{"*"}}}})
	self := strings.TrimPrefix(open.url, "http://")
	for _, c := range []struct {
		name   string
		h      *harness
		header map[string]string
		status int
		says   string
	}{
		{"toold's own page", open, map[string]string{"Origin": open.url}, 200, `"success":true`},
		{"toold's own page over TLS", open, map[string]string{"Origin": "https://" + self}, 200, `"success":true`},
		{"another port", open, map[string]string{"Origin": "http://127.0.0.1:1"}, 403, "origin_not_allowed"},
		{"a look-alike", open, map[string]string{"Origin": "http://" + self + ".evil.example"}, 403, "origin_not_allowed"},
		{"another scheme", open, map[string]string{"Origin": "file://" + self}, 403, "origin_not_allowed"},
		{"rebound, no keys", open, map[string]string{"Origin": "http://attacker.example:8080", "Host": "attacker.example:8080"}, 403, "host_not_allowed"},
		{"rebound, keys", keyed, map[string]string{"Origin": "http://attacker.example:8080", "Host": "attacker.example:8080"}, 401, "unauthenticated"},
	} {
		c.header["Content-Type"] = "application/json"
		status, _, body := c.h.rawDo("POST", "/tools/echo/execute", `{"message":"hi"}`, c.header)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %.300s", c.name, status, body)
		}
	}
}

// FuzzSameOrigin: an Origin is toold's own only when it is exactly
// http:// or https:// and the request's Host, whatever the bytes.
func FuzzSameOrigin(f *testing.F) {
	for _, s := range [][2]string{{"http://127.0.0.1:8080", "127.0.0.1:8080"}, {"https://LOCALHOST", "localhost"},
		{"http://a.example.evil", "a.example"}, {"file://x", "x"}, {"http://", ""}, {"null", "null"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, origin, host string) {
		if !sameOrigin(origin, host) {
			return
		}
		o, h := strings.ToLower(origin), strings.ToLower(host)
		if h == "" || (o != "http://"+h && o != "https://"+h) {
			t.Errorf("sameOrigin(%q, %q) is true", origin, host)
		}
	})
}
