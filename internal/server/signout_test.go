package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/oauth/oidctest"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// The console's sign-in, as a browser goes through it against two
// replicas sharing one state store, with the real OpenID Provider.
const ssoResource = "http://127.0.0.1/mcp"

var ssoUser = oidctest.User{ID: "u-alice", Username: "alice", Password: "alice-pw"}

// ssoReplicas starts the provider and two replicas (A and B) of one
// toold: one store (two connections), one session secret. ttl is the
// console's session_ttl.
func ssoReplicas(t *testing.T, ttl time.Duration) (a, b *harness) {
	t.Helper()
	return ssoReplicasTTL(t, ttl, 0)
}

// ssoReplicasTTL is ssoReplicas with the provider's access tokens living
// accessTTL seconds (0: five minutes), and no clock skew allowed on them.
func ssoReplicasTTL(t *testing.T, ttl time.Duration, accessTTL int) (a, b *harness) {
	t.Helper()
	console := oidctest.Client{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:*/auth/callback"},
		Audience: []string{ssoResource}, AccessTTL: accessTTL}
	idp := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}, Users: []oidctest.User{ssoUser}})
	issuers := oauth.Issuers{{Issuer: idp.Issuer, Audience: ssoResource, Allow: []string{"127.0.0.1"}, AllowHTTP: true,
		Console: oauth.Console{ClientID: "console", ClientSecret: "console-secret", SessionSecret: strings.Repeat("s", 40), SessionTTL: ttl}}}
	if accessTTL > 0 {
		issuers[0].Skew = time.Nanosecond
	}
	sa, sb := statetest.OpenPair(t, state.Options{})
	keys := []auth.Key{{Name: "ops", SHA256: auth.Hash("toold_sso_key_0123456789abcdef01"), Tools: []string{"*"}}}
	return newHarness(t, harnessOpts{st: sa, issuers: issuers, keys: keys}), newHarness(t, harnessOpts{st: sb, issuers: issuers, keys: keys})
}

// browser is a browser: its own cookies, redirects followed by hand.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request and returns the response with its body read.
func (b *browser) do(method, u string, form url.Values, header map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// next follows a redirect.
func (b *browser) next(resp *http.Response) *url.URL {
	b.t.Helper()
	loc, err := resp.Location()
	if err != nil {
		b.t.Fatalf("%s %s: %s, no redirect", resp.Request.Method, resp.Request.URL.Path, resp.Status)
	}
	return loc
}

// startSignIn opens toold's sign-in on the replica at base and goes
// through the provider's login form: it returns the callback URL the
// provider sends the browser back to (not followed yet).
func (b *browser) startSignIn(base string) *url.URL {
	b.t.Helper()
	resp, _ := b.do("GET", base+oauth.LoginPath+"?issuer=0&return=%2Fconsole%2F", nil, nil)
	login := b.next(resp) // the provider's authorization endpoint
	resp, _ = b.do("GET", login.String(), nil, nil)
	form := b.next(resp) // its login form
	resp, _ = b.do("POST", form.Scheme+"://"+form.Host+"/login/username",
		url.Values{"id": {form.Query().Get("authRequestID")}, "username": {ssoUser.Username}, "password": {ssoUser.Password}}, nil)
	resp, _ = b.do("GET", b.next(resp).String(), nil, nil)
	return b.next(resp)
}

// session is GET /auth/session on the replica at base.
func (b *browser) session(base string) (signedIn bool, csrf string) {
	b.t.Helper()
	resp, body := b.do("GET", base+"/auth/session", nil, nil)
	var v struct {
		SignedIn  bool   `json:"signed_in"`
		CSRFToken string `json:"csrf_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		b.t.Fatalf("GET /auth/session: %s %s", resp.Status, body)
	}
	return v.SignedIn, v.CSRFToken
}

// cookie is the browser's cookie name for toold's host.
func (b *browser) cookie(base, name string) *http.Cookie {
	u, _ := url.Parse(base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestSignOutEndsTheSessionEverywhere (issue 38, item 11): a session
// opened on replica A is good on B; POST /auth/logout on A revokes it in
// the store, and from then the old cookie — the browser's, or a copy of
// it, with its CSRF token — is signed out on both replicas: GET
// /auth/session says so and an API route refuses it 401. With a refresh
// token (the provider lists offline_access) the session's cookie lives
// session_ttl, not its first token's five minutes.
func TestSignOutEndsTheSessionEverywhere(t *testing.T) {
	a, b := ssoReplicas(t, 24*time.Hour)
	alice := newBrowser(t)
	resp, _ := alice.do("GET", alice.startSignIn(a.url).String(), nil, nil)
	if resp.StatusCode != http.StatusSeeOther || alice.next(resp).Path != "/console/" {
		t.Fatalf("the callback: %s %v", resp.Status, resp.Header)
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == oauth.SessionCookieName(false) {
			session = c
		}
	}
	// The provider's tokens live five minutes, and come with a refresh
	// token: the session lasts session_ttl, a day.
	if session == nil || session.MaxAge <= 301 || session.MaxAge > 24*3600 {
		t.Fatalf("the session cookie: %+v", session)
	}
	in, csrf := alice.session(b.url)
	if !in || csrf == "" {
		t.Fatal("the session is not good on the other replica")
	}
	copied := newBrowser(t) // someone who copied the cookie
	copied.c.Jar.SetCookies(mustURL(a.url), []*http.Cookie{{Name: session.Name, Value: session.Value, Path: "/"}})
	if in, _ := copied.session(b.url); !in {
		t.Fatal("the copied cookie is not good before the sign-out")
	}

	if resp, body := alice.do("POST", a.url+"/auth/logout", nil, map[string]string{oauth.CSRFHeader: csrf}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %s %s", resp.Status, body)
	}
	for _, replica := range []*harness{a, b} {
		if in, _ := copied.session(replica.url); in {
			t.Errorf("%s: the copied cookie is still signed in after the sign-out", replica.url)
		}
		for _, call := range []struct{ method, path string }{{"GET", "/tools"}, {"POST", "/approvals/0123456789abcdef01234567"}} {
			resp, body := copied.do(call.method, replica.url+call.path, nil, map[string]string{oauth.CSRFHeader: csrf, "Content-Type": "application/json"})
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s %s with the signed-out cookie: %s %s", replica.url, call.method, call.path, resp.Status, body)
			}
		}
	}
}

// TestSessionRefreshesOnEveryReplica: with access tokens that live one
// second, a session opened on replica A is good on B after its token
// expired (B refreshes it, with the refresh token the shared store keeps
// sealed), then on A (which reads B's refresh: the provider rotates
// refresh tokens, so A trading the first one again would be refused and
// end the session), and after the next expiry with requests on both
// replicas at once; signing out on B ends it on A.
func TestSessionRefreshesOnEveryReplica(t *testing.T) {
	a, b := ssoReplicasTTL(t, time.Hour, 1)
	alice := newBrowser(t)
	resp, _ := alice.do("GET", alice.startSignIn(a.url).String(), nil, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the callback: %s", resp.Status)
	}
	signedIn := time.Now()
	get := func(h *harness) int {
		resp, _ := alice.do("GET", h.url+"/tools", nil, nil)
		return resp.StatusCode
	}
	// A token's exp is in whole seconds, at most one after it was
	// issued: two seconds on, the one in use has expired (and there is
	// nothing else to wait on: every request in between succeeds).
	time.Sleep(time.Until(signedIn.Add(2 * time.Second)))
	if got := get(b); got != http.StatusOK {
		t.Fatalf("B, after the first token expired: %d", got)
	}
	if got := get(a); got != http.StatusOK {
		t.Fatalf("A, after B refreshed the session: %d", got)
	}
	time.Sleep(time.Until(signedIn.Add(4 * time.Second)))
	codes := make(chan int, 8)
	for i := range 8 {
		go func() { codes <- get([]*harness{a, b}[i%2]) }()
	}
	for range 8 {
		if got := <-codes; got != http.StatusOK {
			t.Errorf("a request on both replicas at once, after the second token expired: %d", got)
		}
	}
	in, csrf := alice.session(b.url)
	if !in {
		t.Fatal("not signed in on B")
	}
	copied := newBrowser(t)
	copied.c.Jar.SetCookies(mustURL(a.url), []*http.Cookie{alice.cookie(a.url, oauth.SessionCookieName(false))})
	if resp, body := alice.do("POST", b.url+"/auth/logout", nil, map[string]string{oauth.CSRFHeader: csrf}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %s %s", resp.Status, body)
	}
	if in, _ := copied.session(a.url); in {
		t.Error("signed out on B, the session's cookie is still signed in on A")
	}
}

// TestSignInIsBoundToItsBrowser (issue 38, item 11): a login cookie and
// state from one browser do not complete the sign-in in another — neither
// one that started a sign-in of its own, nor one without any — and the
// browser that started it still can.
func TestSignInIsBoundToItsBrowser(t *testing.T) {
	a, _ := ssoReplicas(t, 0)
	started := newBrowser(t)
	callback := started.startSignIn(a.url)
	login := started.cookie(a.url+oauth.CallbackPath, "toold_login")
	if login == nil {
		t.Fatal("no login cookie")
	}
	other := newBrowser(t)
	other.startSignIn(a.url) // a sign-in of its own: its own browser cookie
	bare := newBrowser(t)
	for name, br := range map[string]*browser{"a browser with its own sign-in": other, "a browser without one": bare} {
		br.c.Jar.SetCookies(mustURL(a.url+oauth.CallbackPath), []*http.Cookie{{Name: login.Name, Value: login.Value, Path: oauth.CallbackPath}})
		resp, _ := br.do("GET", callback.String(), nil, nil)
		if got := br.next(resp); !strings.Contains(got.RawQuery, "signin_error=browser_mismatch") {
			t.Errorf("%s completed the sign-in: %s %s", name, resp.Status, got)
		}
		if in, _ := br.session(a.url); in {
			t.Errorf("%s is signed in", name)
		}
	}
	resp, _ := started.do("GET", callback.String(), nil, nil)
	if got := started.next(resp); got.Path != "/console/" || got.RawQuery != "" {
		t.Fatalf("the browser that started it: %s %s", resp.Status, got)
	}
	if in, _ := started.session(a.url); !in {
		t.Error("the browser that started the sign-in is not signed in")
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
