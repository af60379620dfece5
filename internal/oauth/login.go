package oauth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
)

// Single sign-on for the console: the authorization code flow with PKCE
// (S256) against an issuer's authorization and token endpoints, as a
// confidential client (client_secret_basic) or a public one. What the
// browser must carry between the two legs (state, the PKCE verifier, where
// to return) is sealed into a short-lived cookie, bound to the browser
// that started the sign-in by a second cookie (below); the access token it
// ends with is verified as any bearer token is (it must be for this
// resource), and sealed into the session cookie (session.go). The console
// is a client of the API, and a session is a token; what toold keeps is
// the record of sessions signed out (revoke.go).
//
// The binding: the login cookie is scoped to the callback's path, which
// rules out the __Host- prefix, so a sibling site under the same domain
// could plant one (cookie tossing) and have a victim's browser complete
// the planter's sign-in (login CSRF). BeginSignIn therefore also sets a
// browser cookie — random, __Host- prefixed outside loopback (only this
// host can set it), SameSite=Lax so it comes back with the issuer's
// redirect — and the login state holds its hash: a login cookie and state
// presented with another browser's cookie, or without one, complete
// nothing.

// LoginPath and CallbackPath are where sign-in starts and where the
// issuer sends the browser back.
const (
	LoginPath    = "/auth/login"
	CallbackPath = "/auth/callback"
	loginCookie  = "toold_login"
	loginFor     = 10 * time.Minute
	// browserCookie binds a sign-in to the browser that started it;
	// __Host- prefixed when Secure.
	browserCookie       = "toold_browser"
	secureBrowserCookie = "__Host-toold_browser"
)

// signIn is an issuer's console client.
type signIn struct {
	is     *issuer
	cfg    Console
	sealer *sealer
}

// loginState is what the login cookie carries to the callback.
type loginState struct {
	Issuer   string `json:"iss"`
	State    string `json:"state"`
	Verifier string `json:"pkce"`
	Redirect string `json:"redirect"`
	Return   string `json:"return"`
	Expires  int64  `json:"exp"`
	// Browser is the hash of the browser cookie set with the login
	// cookie: the callback must come from the same browser.
	Browser string `json:"browser"`
}

// SignInError is a sign-in that did not end in a session: Code is what
// the console shows (access_denied, a state mismatch, ...); it never
// holds a credential.
type SignInError struct{ Code, Description string }

func (e *SignInError) Error() string { return e.Code + ": " + e.Description }

func signInError(code, format string, args ...any) error {
	return &SignInError{Code: code, Description: fmt.Sprintf(format, args...)}
}

// SignInIssuers lists the issuers people can sign in to the console with,
// in configuration order (the index BeginSignIn takes).
func (v *Verifier) SignInIssuers() []string {
	if v == nil {
		return nil
	}
	out := make([]string, len(v.signins))
	for i, si := range v.signins {
		out[i] = si.is.cfg.Issuer
	}
	return out
}

// BeginSignIn starts signing a person in with issuer i: it returns the
// authorization URL to send the browser to and the cookies to set: the
// login cookie, which carries the flow's state to the callback, and the
// browser cookie it is bound to. host and secure describe the request
// (for the default redirect URL); returnTo is the console path to come
// back to.
func (v *Verifier) BeginSignIn(ctx context.Context, i int, host string, secure bool, returnTo string) (string, []*http.Cookie, error) {
	if v == nil || i < 0 || i >= len(v.signins) {
		return "", nil, signInError("no_issuer", "there is no issuer %d to sign in with", i)
	}
	si := v.signins[i]
	d, err := si.is.metadata(ctx)
	if err != nil {
		return "", nil, err
	}
	if d.AuthorizationEndpoint == "" || d.TokenEndpoint == "" {
		return "", nil, fmt.Errorf("%w: the issuer's metadata names no authorization or token endpoint", errUnavailable)
	}
	browser := random()
	st := loginState{Issuer: si.is.cfg.Issuer, State: random(), Verifier: random(), Redirect: si.redirectURL(host, secure),
		Return: safeReturn(returnTo), Expires: v.now().Add(loginFor).Unix(), Browser: browserHash(browser)}
	value, err := si.sealer.seal(loginCookie, st)
	if err != nil {
		return "", nil, err
	}
	challenge := sha256.Sum256([]byte(st.Verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {si.cfg.ClientID}, "redirect_uri": {st.Redirect},
		"scope": {strings.Join(si.scopes(d), " ")}, "state": {st.State}, "resource": {si.is.cfg.Audience},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"}}
	sep := "?"
	if strings.Contains(d.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	// The login cookie goes back with the issuer's redirect, a top-level
	// navigation from another site: SameSite=Lax, and only to the callback.
	c := &http.Cookie{Name: loginCookie, Value: value, Path: CallbackPath, MaxAge: int(loginFor.Seconds()), HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteLaxMode}
	b := &http.Cookie{Name: BrowserCookieName(secure), Value: browser, Path: "/", MaxAge: int(loginFor.Seconds()), HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteLaxMode}
	return d.AuthorizationEndpoint + sep + q.Encode(), []*http.Cookie{c, b}, nil
}

// BrowserCookieName is the browser cookie's name: __Host- prefixed when
// it is Secure.
func BrowserCookieName(secure bool) string {
	if secure {
		return secureBrowserCookie
	}
	return browserCookie
}

// browserHash is what the login state keeps of the browser cookie.
func browserHash(v string) string {
	sum := sha256.Sum256([]byte("toold browser\x00" + v))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// sameBrowser reports whether r carries the browser cookie st was bound
// to.
func sameBrowser(r *http.Request, st *loginState, secure bool) bool {
	c, err := r.Cookie(BrowserCookieName(secure))
	return err == nil && st.Browser != "" && subtle.ConstantTimeCompare([]byte(browserHash(c.Value)), []byte(st.Browser)) == 1
}

// FinishSignIn completes a sign-in at the callback: it checks the state
// against the login cookie, trades the code (with the PKCE verifier) for
// an access token at the token endpoint, verifies the token as any bearer
// token, and returns the session cookie, the console path to return to,
// and who signed in.
func (v *Verifier) FinishSignIn(ctx context.Context, r *http.Request, secure bool) (*http.Cookie, string, *auth.Principal, error) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return nil, "", nil, signInError(printableCode(e), "the issuer refused the sign-in")
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || v == nil {
		return nil, "", nil, signInError("no_login", "no sign-in was started in this browser, or it took longer than %v", loginFor)
	}
	st, si, err := v.openLogin(c.Value)
	if err != nil {
		return nil, "", nil, err
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		return nil, "", nil, signInError("state_mismatch", "the callback's state is not the one this browser sent")
	}
	if !sameBrowser(r, st, secure) {
		return nil, "", nil, signInError("browser_mismatch", "the sign-in was started in another browser")
	}
	tok, err := si.exchange(ctx, q.Get("code"), st)
	if err != nil {
		return nil, "", nil, err
	}
	p, until, err := v.authenticate(ctx, tok.AccessToken)
	if err != nil {
		return nil, "", nil, signInError("invalid_token", "the issuer's access token is not one toold accepts: %v", err)
	}
	if p.Issuer != si.is.cfg.Issuer {
		return nil, "", nil, signInError("invalid_token", "the access token names another issuer")
	}
	session, err := v.newSession(ctx, si, tok, until, secure)
	return session, st.Return, p, err
}

// openLogin reads the login cookie: sealed by one of the issuers' sign-in
// clients, and not expired.
func (v *Verifier) openLogin(value string) (*loginState, *signIn, error) {
	for _, si := range v.signins {
		var st loginState
		if si.sealer.open(loginCookie, value, &st) == nil && st.Issuer == si.is.cfg.Issuer {
			if v.now().Unix() > st.Expires {
				break
			}
			return &st, si, nil
		}
	}
	return nil, nil, signInError("no_login", "the sign-in's cookie is not valid, or it took longer than %v", loginFor)
}

// exchange trades the authorization code for tokens (RFC 6749 §4.1.3,
// with PKCE and the resource of RFC 8707).
func (si *signIn) exchange(ctx context.Context, code string, st *loginState) (*tokenAnswer, error) {
	return si.tokenRequest(ctx, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {st.Redirect},
		"code_verifier": {st.Verifier}, "resource": {si.is.cfg.Audience}})
}

// tokenAnswer is what toold reads of a token endpoint's answer.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Error        string `json:"error"`
}

// tokenRequest posts a grant to the issuer's token endpoint as the
// console's client. A refusal is a *SignInError with the issuer's error
// code (invalid_grant: the grant is spent, expired or revoked); an issuer
// that cannot be reached wraps errUnavailable. Neither quotes a token.
func (si *signIn) tokenRequest(ctx context.Context, form url.Values) (*tokenAnswer, error) {
	d, err := si.is.metadata(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := si.post(ctx, d.TokenEndpoint, form)
	si.is.m.fetch(si.is.cfg.Issuer, "token", err)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes))
	var out tokenAnswer
	if resp.StatusCode >= 500 {
		return nil, fmt.Errorf("%w (%w): the token endpoint answered %s", errUnavailable, errIssuerFailed, resp.Status)
	}
	if json.Unmarshal(b, &out) != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return nil, signInError(printableCode(cmp.Or(out.Error, "token_refused")), "the issuer's token endpoint answered %s", resp.Status)
	}
	return &out, nil
}

// post sends a form to one of the issuer's endpoints with the console
// client's authentication: client_secret_basic for a confidential one,
// its client_id in the form for a public one.
func (si *signIn) post(ctx context.Context, endpoint string, form url.Values) (*http.Response, error) {
	if si.cfg.ClientSecret == "" {
		form.Set("client_id", si.cfg.ClientID)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if si.cfg.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(si.cfg.ClientID), url.QueryEscape(si.cfg.ClientSecret))
	}
	resp, err := si.is.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// cancelOnClose releases a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// redirectURL is the callback as the issuer knows it: configured, or this
// request's host (http on loopback, https elsewhere).
func (si *signIn) redirectURL(host string, secure bool) string {
	if si.cfg.RedirectURL != "" {
		return si.cfg.RedirectURL
	}
	scheme := "https"
	if !secure && loopbackHost(host) {
		scheme = "http"
	}
	return scheme + "://" + host + CallbackPath
}

// scopes asked for: configured, or openid, toold's roles' scopes and,
// where the issuer lists it, offline_access (a refresh token, so a
// session outlives its first access token: refresh.go).
func (si *signIn) scopes(d *discovery) []string {
	if len(si.cfg.Scopes) > 0 {
		return si.cfg.Scopes
	}
	out := []string{"openid"}
	for _, r := range auth.Roles {
		if s := si.is.scopeFor(r); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if slices.Contains(d.ScopesSupported, offlineAccess) {
		out = append(out, offlineAccess)
	}
	return out
}

// safeReturn keeps a return path inside the console: never another site.
func safeReturn(p string) string {
	if !strings.HasPrefix(p, "/console/") || strings.ContainsAny(p, "\\\r\n") || strings.HasPrefix(p, "//") {
		return "/console/"
	}
	return p
}

// printableCode keeps an error code to the characters RFC 6749 allows.
func printableCode(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// random is 32 random bytes, base64url: a state, a PKCE verifier, a CSRF
// token.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
