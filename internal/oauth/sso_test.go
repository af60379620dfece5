package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/oauth/oidctest"
)

// TestSignInFlow: the console's sign-in against the real provider, leg by
// leg as a browser makes it: the authorization request (PKCE S256, state,
// resource), the provider's login form, the callback with the login
// cookie and the browser cookie it is bound to, the session cookie, and
// the session it opens; a callback whose state is not the browser's, or
// without the login cookie, or with the issuer's error, or from another
// browser (a login cookie and state of this one, with another's browser
// cookie or none: issue 38, item 11), opens none.
func TestSignInFlow(t *testing.T) {
	console := oidctest.Client{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:8080/auth/callback"}, Audience: []string{resource}}
	p := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}, Users: []oidctest.User{alice}})
	v, err := New(Options{Issuers: Issuers{{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true,
		Console: Console{ClientID: "console", ClientSecret: "console-secret"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	to, cookies, err := v.BeginSignIn(ctx, 0, "127.0.0.1:8080", false, "https://evil.test/")
	if err != nil {
		t.Fatal(err)
	}
	login, browser := cookies[0], cookies[1]
	if browser.Name != "toold_browser" || browser.Path != "/" || !browser.HttpOnly || browser.SameSite != http.SameSiteLaxMode || len(browser.Value) < 40 {
		t.Fatalf("the browser cookie: %+v", browser)
	}
	_, other, err := v.BeginSignIn(ctx, 0, "127.0.0.1:8080", false, "/console/") // another browser's sign-in
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(to)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("resource") != resource || q.Get("redirect_uri") != "http://127.0.0.1:8080/auth/callback" ||
		q.Get("scope") != "openid toold:call toold:observe toold:admin toold:approve offline_access" || login.SameSite != http.SameSiteLaxMode || !login.HttpOnly {
		t.Fatalf("the authorization request: %s, cookie %+v", to, login)
	}
	callback := browse(t, to, "alice", "alice-pw")
	for name, tt := range map[string]struct {
		query   string
		cookies []*http.Cookie
		code    string
	}{
		"another state":   {strings.Replace(callback.RawQuery, "state=", "state=x", 1), cookies, "state_mismatch"},
		"no login cookie": {callback.RawQuery, []*http.Cookie{browser}, "no_login"},
		"the issuer's no": {"error=access_denied&state=" + q.Get("state"), cookies, "access_denied"},
		"a forged cookie": {callback.RawQuery, []*http.Cookie{{Name: login.Name, Value: "AAAA" + login.Value[4:]}, browser}, "no_login"},
		"another browser": {callback.RawQuery, []*http.Cookie{login, other[1]}, "browser_mismatch"},
		"no browser":      {callback.RawQuery, []*http.Cookie{login}, "browser_mismatch"},
		"another's login": {callback.RawQuery, []*http.Cookie{other[0], browser}, "state_mismatch"},
	} {
		_, _, _, err := v.FinishSignIn(ctx, request(callback.Path+"?"+tt.query, tt.cookies...), false)
		var se *SignInError
		if !errors.As(err, &se) || se.Code != tt.code {
			t.Errorf("%s: %v, want %s", name, err, tt.code)
		}
	}
	session, back, pr, err := v.FinishSignIn(ctx, request(callback.Path+"?"+callback.RawQuery, cookies...), false)
	if err != nil {
		t.Fatal(err)
	}
	if back != "/console/" || pr.Subject != "u-alice" || pr.Client != "console" || session.Name != "toold_session" ||
		session.SameSite != http.SameSiteStrictMode || !session.HttpOnly || session.MaxAge <= 0 || session.MaxAge > 8*3600 {
		t.Errorf("the session: back %q, %+v, cookie %+v", back, pr.Identity, session)
	}
	s, err := v.Session(ctx, request("/approvals", session), false)
	if err != nil || s == nil || s.Principal.Subject != "u-alice" || s.CSRF == "" {
		t.Fatalf("the session read back: %+v %v", s, err)
	}
	post := request("/approvals/x", session)
	post.Method = http.MethodPost
	if s.CheckCSRF(post) {
		t.Error("a POST without the CSRF token passed")
	}
	post.Header.Set(CSRFHeader, s.CSRF)
	if !s.CheckCSRF(post) {
		t.Error("a POST with the CSRF token was refused")
	}
	if s, _ := v.Session(ctx, request("/", session), true); s != nil {
		t.Error("the loopback cookie opened a session under the Secure name")
	}
}

// TestSafeReturn: a sign-in comes back to the console only.
func TestSafeReturn(t *testing.T) {
	for in, want := range map[string]string{"/console/#approvals": "/console/#approvals", "https://evil.test/": "/console/",
		"//evil.test/console/": "/console/", "/console/\r\nx": "/console/", "": "/console/", "/audit": "/console/"} {
		if got := safeReturn(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func request(target string, cookies ...*http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+target, nil)
	for _, c := range cookies {
		if c != nil {
			r.AddCookie(c)
		}
	}
	return r
}

// browse follows the authorization URL through the provider's login form
// and returns the callback URL it sends the browser to.
func browse(t *testing.T, to, user, password string) *url.URL {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next := func(resp *http.Response, err error) *url.URL {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil {
			t.Fatalf("%s: no redirect", resp.Status)
		}
		return loc
	}
	login := next(c.Get(to))
	back := next(c.PostForm(login.Scheme+"://"+login.Host+"/login/username",
		url.Values{"id": {login.Query().Get("authRequestID")}, "username": {user}, "password": {password}}))
	return next(c.Get(back.String()))
}
