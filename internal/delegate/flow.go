package delegate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
)

// How long each step of the consent may take: the start URL a refusal
// names, and the authorization at the server once begun.
const (
	startFor = 15 * time.Minute
	flowFor  = 10 * time.Minute
)

// start is what a start URL carries, sealed: who it is for and what.
type start struct {
	Connection string         `json:"c"`
	Principal  string         `json:"p"`
	Who        *auth.Identity `json:"w,omitempty"`
	Expires    int64          `json:"e"`
}

// kindStart seals start URLs.
const kindStart = "start"

// startURL is who's start URL for a connection: a toold page, sealed so
// it names them without showing it, short-lived.
func (m *Manager) startURL(who *auth.Identity, connection string) (string, error) {
	c := m.Connection(connection)
	if c == nil {
		return "", fmt.Errorf("no connection %q", connection)
	}
	p, err := c.principal(who)
	if err != nil {
		return "", err
	}
	if who != nil {
		w := *who
		w.Narrow, w.Narrowed = nil, false
		who = &w
	}
	b, _ := json.Marshal(start{Connection: connection, Principal: p, Who: who, Expires: m.now().Add(startFor).Unix()})
	sealed := m.opts.Keys.Seal(kindStart, "", "", b)
	return m.publicURL() + StartPath + "?flow=" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// AuthorizeURL is who's start URL for a connection (GET
// /connections/{name}/authorize redirects there): ErrNoConnection for a
// name no downstream has.
func (m *Manager) AuthorizeURL(who *auth.Identity, connection string) (string, error) {
	c := m.Connection(connection)
	if c == nil || c.oauth == nil {
		return "", ErrNoConnection
	}
	return m.startURL(who, connection)
}

// ErrNoConnection is a name no OAuth connection has.
var ErrNoConnection = errors.New("no such connection")

// ConsentError is a consent step that cannot go on: Reason says why
// (expired, state_mismatch, access_denied, ...), for the page; it never
// holds a credential.
type ConsentError struct{ Reason, Description string }

func (e *ConsentError) Error() string { return e.Reason + ": " + e.Description }

func consentError(code, format string, args ...any) error {
	return &ConsentError{Reason: code, Description: fmt.Sprintf(format, args...)}
}

// Pending is a start URL, opened: what the confirmation page shows.
type Pending struct {
	Connection string
	// Who is the principal the connection will be for, as people read it.
	Who string
}

// Open reads a start URL's flow parameter: sealed by this toold (or a
// replica sharing its key) and not expired.
func (m *Manager) Open(flow string) (*Pending, error) {
	st, err := m.openStart(flow)
	if err != nil {
		return nil, err
	}
	return &Pending{Connection: st.Connection, Who: whoName(st)}, nil
}

func whoName(st *start) string {
	if st.Principal == sharedPrincipal {
		return "every caller (a shared connection)"
	}
	return credentials.DisplayName(st.Who)
}

func (m *Manager) openStart(flow string) (*start, error) {
	raw, err := base64.RawURLEncoding.DecodeString(flow)
	if err != nil || len(flow) > 4096 {
		return nil, consentError("invalid_link", "the link is not one toold made")
	}
	plain, _, err := m.opts.Keys.Open(kindStart, "", "", raw)
	if err != nil {
		return nil, consentError("invalid_link", "the link is not one toold made (or toold's credentials key changed)")
	}
	var st start
	if json.Unmarshal(plain, &st) != nil || m.Connection(st.Connection) == nil {
		return nil, consentError("invalid_link", "the link names no connection of this toold")
	}
	if m.now().Unix() > st.Expires {
		return nil, consentError("expired", "the link is older than %v: call the tool again for a new one", startFor)
	}
	return &st, nil
}

// flowRecord is an authorization in progress, in the store (sealed).
type flowRecord struct {
	Connection string         `json:"c"`
	Principal  string         `json:"p"`
	Who        *auth.Identity `json:"w,omitempty"`
	Verifier   string         `json:"v"`
	Redirect   string         `json:"r"`
	Issuer     string         `json:"i"`
	ClientID   string         `json:"cid"`
	Resource   string         `json:"res,omitempty"`
	Scopes     []string       `json:"s,omitempty"`
}

// Begin starts the authorization a start URL names (the person confirmed
// it): the flow is stored under a fresh state, and the answer is the
// authorization server's URL to send the browser to, with the cookie that
// binds the flow to this browser. secure makes the cookie Secure.
func (m *Manager) Begin(ctx context.Context, flow string, secure bool) (string, *http.Cookie, error) {
	st, err := m.openStart(flow)
	if err != nil {
		return "", nil, err
	}
	c := m.Connection(st.Connection)
	md, err := c.metadata(ctx)
	if err != nil {
		return "", nil, err
	}
	ca, err := c.client(ctx, md)
	if err != nil {
		return "", nil, err
	}
	nonce := random()
	rec := flowRecord{Connection: st.Connection, Principal: st.Principal, Who: st.Who, Verifier: random(), Redirect: m.CallbackURL(),
		Issuer: md.Issuer, ClientID: ca.id, Resource: c.resource, Scopes: c.askScopes()}
	b, _ := json.Marshal(rec)
	if err := m.opts.Vault.SaveFlow(ctx, nonce, b, flowFor); err != nil {
		return "", nil, err
	}
	challenge := sha256.Sum256([]byte(rec.Verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {ca.id}, "redirect_uri": {rec.Redirect},
		"state": {m.state(nonce)}, "code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])},
		"code_challenge_method": {"S256"}}
	if len(rec.Scopes) > 0 {
		q.Set("scope", joinScopes(rec.Scopes))
	}
	if rec.Resource != "" {
		q.Set("resource", rec.Resource)
	}
	sep := "?"
	if strings.Contains(md.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	// The cookie comes back with the server's redirect, a top-level
	// navigation from another site: SameSite=Lax, and only to the callback.
	cookie := &http.Cookie{Name: m.cookieName(nonce), Value: base64.RawURLEncoding.EncodeToString(m.sign("bind", nonce)),
		Path: CallbackPath, MaxAge: int(flowFor.Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	return md.AuthorizationEndpoint + sep + q.Encode(), cookie, nil
}

func (c *Connection) askScopes() []string {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	return append([]string(nil), c.scopes...)
}

// state is the state parameter: the flow's nonce and its MAC, so a made-up
// state is refused before the store is asked.
func (m *Manager) state(nonce string) string {
	return nonce + "." + base64.RawURLEncoding.EncodeToString(m.sign("state", nonce))
}

func (m *Manager) cookieName(nonce string) string {
	return "toold_connect_" + hex.EncodeToString(m.sign("cookie", nonce)[:6])
}

// Connected is a finished consent step.
type Connected struct {
	Connection string
	Who        *auth.Identity
	// WhoName is the principal as people read it.
	WhoName string
	Scopes  []string
	// ClearCookie expires the binding cookie.
	ClearCookie *http.Cookie
}

// Finish completes a consent step at the callback: the state must be one
// this toold made, not used before (the flow is taken from the store
// once), and bound to this browser (its cookie); the authorization
// server's iss, when it sends one, must be the one the flow went to (RFC
// 9207); the code is traded, with the PKCE verifier, for tokens stored for
// the flow's principal.
func (m *Manager) Finish(ctx context.Context, r *http.Request, secure bool) (*Connected, error) {
	q := r.URL.Query()
	nonce, mac, ok := strings.Cut(q.Get("state"), ".")
	want := base64.RawURLEncoding.EncodeToString(m.sign("state", nonce))
	if !ok || nonce == "" || len(nonce) > 64 || subtle.ConstantTimeCompare([]byte(mac), []byte(want)) != 1 {
		return nil, consentError("invalid_state", "the state is not one toold made")
	}
	clear := &http.Cookie{Name: m.cookieName(nonce), Value: "", Path: CallbackPath, MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	cookie, err := r.Cookie(m.cookieName(nonce))
	bind := base64.RawURLEncoding.EncodeToString(m.sign("bind", nonce))
	if err != nil || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(bind)) != 1 {
		return nil, consentError("other_browser", "this authorization was started in another browser (or its cookie expired): "+
			"open the link toold gave in the browser that finishes it")
	}
	b, err := m.opts.Vault.TakeFlow(ctx, nonce)
	if errors.Is(err, credentials.ErrMissing) {
		return nil, consentError("used_or_expired", "this authorization was already used, or took longer than %v", flowFor)
	}
	if err != nil {
		return nil, err
	}
	var rec flowRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	if e := q.Get("error"); e != "" {
		return nil, consentError(printableCode(e), "the authorization server refused: %s", printable(q.Get("error_description")))
	}
	c := m.Connection(rec.Connection)
	if c == nil {
		return nil, consentError("invalid_state", "the connection is gone from the configuration")
	}
	md, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	if iss := q.Get("iss"); (iss != "" || md.AuthorizationResponseIssParameterSupported) && iss != rec.Issuer {
		return nil, consentError("issuer_mismatch", "the answer comes from another authorization server than the one asked (RFC 9207)")
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		return nil, consentError("invalid_request", "the callback carries no code")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {rec.Redirect}, "code_verifier": {rec.Verifier}}
	if rec.Resource != "" {
		form.Set("resource", rec.Resource)
	}
	ca, err := c.client(ctx, md)
	if err != nil {
		return nil, err
	}
	if ca.id != rec.ClientID {
		return nil, consentError("client_changed", "toold's client at the authorization server changed during the authorization: start again")
	}
	g, err := requestToken(ctx, c.d.Client, md.TokenEndpoint, ca, form, m.now)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) {
			return nil, consentError(te.OAuthError, "the authorization server refused the code: %s", te.Description)
		}
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	now := m.now().UTC()
	tok := &credentials.Token{AccessToken: g.AccessToken, RefreshToken: g.RefreshToken, TokenType: g.TokenType, Expiry: g.Expiry,
		Scopes: g.Scopes, Issuer: rec.Issuer, ClientID: rec.ClientID, Resource: rec.Resource, ConnectedAt: now}
	if tok.Scopes == nil {
		tok.Scopes = rec.Scopes
	}
	if _, err := m.opts.Vault.SaveTokens(ctx, rec.Principal, rec.Connection, tok, 0); err != nil {
		return nil, err
	}
	c.cache.Store(rec.Principal, credentialOf(tok))
	m.log.Info("an OAuth connection was made", zap.String("connection", rec.Connection))
	if m.opts.OnConnect != nil {
		m.opts.OnConnect(ctx, rec.Who, rec.Connection)
	}
	st := &start{Principal: rec.Principal, Who: rec.Who}
	return &Connected{Connection: rec.Connection, Who: rec.Who, WhoName: whoName(st), Scopes: tok.Scopes, ClearCookie: clear}, nil
}

// Disconnect forgets who's tokens of a connection, revoking them first at
// the authorization server when it offers revocation (RFC 7009): the
// refresh token, which takes the access token with it at most servers,
// then the access token. false when who had not connected.
func (m *Manager) Disconnect(ctx context.Context, who *auth.Identity, connection string) (bool, error) {
	c := m.Connection(connection)
	if c == nil || c.oauth == nil {
		return false, ErrNoConnection
	}
	p, err := c.principal(who)
	if err != nil {
		return false, err
	}
	v := m.opts.Vault
	tok, _, err := v.Tokens(ctx, p, connection)
	if errors.Is(err, credentials.ErrMissing) {
		c.cache.Delete(p)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.revoke(ctx, tok)
	c.cache.Delete(p)
	if err := v.DeleteTokens(ctx, p, connection); err != nil {
		return true, err
	}
	if m.opts.OnDisconnect != nil {
		m.opts.OnDisconnect(ctx, who, connection)
	}
	return true, nil
}

// revoke asks the server to revoke the tokens, best effort: a server that
// cannot be reached does not keep a person connected against their will
// (toold forgets the tokens either way, and says so in the log).
func (c *Connection) revoke(ctx context.Context, tok *credentials.Token) {
	md, err := c.metadata(ctx)
	if err != nil || md.RevocationEndpoint == "" {
		return
	}
	ca, err := c.client(ctx, md)
	if err != nil {
		return
	}
	for _, t := range []struct{ token, hint string }{{tok.RefreshToken, "refresh_token"}, {tok.AccessToken, "access_token"}} {
		if t.token == "" {
			continue
		}
		status, _, err := postForm(ctx, c.d.Client, md.RevocationEndpoint, ca, url.Values{"token": {t.token}, "token_type_hint": {t.hint}})
		if err != nil || status != http.StatusOK {
			c.m.log.Warn("revoking a token at the authorization server failed; toold forgets it anyway",
				zap.String("connection", c.d.Name), zap.String("token", t.hint), zap.Int("status", status), zap.Error(err))
		}
	}
}

// Status is a connection as a caller's listing shows it.
type Status struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	// Shared: one connection serves every caller.
	Shared bool `json:"shared,omitempty"`
	credentials.Connection
	// AuthorizeURL is where to connect (or connect again).
	AuthorizeURL string `json:"authorize_url,omitempty"`
}

// List is every OAuth connection as who sees it: connected or not, with
// the scopes, expiry and dates of their own tokens, and where to connect.
func (m *Manager) List(ctx context.Context, who *auth.Identity) ([]Status, error) {
	out := []Status{}
	for _, name := range m.Names() {
		c := m.Connection(name)
		s := Status{Name: name, Shared: !c.PerUser()}
		p, err := c.principal(who)
		if err != nil {
			return nil, err
		}
		tok, _, err := m.opts.Vault.Tokens(ctx, p, name)
		switch {
		case err == nil:
			s.Connected, s.Connection = true, tok.View(name)
		case !errors.Is(err, credentials.ErrMissing):
			return nil, err
		}
		s.Connection.Name = name
		if s.Connection.Scopes == nil {
			s.Connection.Scopes = []string{}
		}
		s.AuthorizeURL, _ = m.startURL(who, name)
		out = append(out, s)
	}
	return out, nil
}

// random is 32 random bytes, base64url: a nonce, a PKCE verifier.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
