package delegate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
)

// Connection is one downstream's way of acting as the user.
type Connection struct {
	m        *Manager
	d        Downstream
	oauth    *OAuthConfig
	resource string

	// cache holds each principal's usable credential: a call with one
	// costs a map lookup.
	cache sync.Map // principal -> *Credential
	locks sync.Map // principal -> *sync.Mutex: one refresh at a time

	metaMu     sync.Mutex
	meta       *ServerMetadata
	scopes     []string // asked for
	metaFailed time.Time
	challenge  string // the resource metadata URL a 401 named
	chScope    string // the scope a 401 named
}

// Credential is what a request carries for a principal: the header value
// ("Bearer …") and when it stops being good. Never logged.
type Credential struct {
	Token  string
	Header string
	Expiry time.Time // zero: unknown (good until a 401)
}

// refreshEarly is how long before its expiry a token is refreshed.
const refreshEarly = 30 * time.Second

func (c *Credential) fresh(now time.Time) bool {
	return c.Expiry.IsZero() || now.Add(refreshEarly).Before(c.Expiry)
}

func newConnection(m *Manager, d Downstream) *Connection {
	c := &Connection{m: m, d: d, oauth: d.OAuth}
	if d.OAuth != nil {
		c.resource = d.OAuth.Resource
		if c.resource == "" && d.MCP {
			c.resource = d.URL
		}
		c.scopes = slices.Clone(d.OAuth.Scopes)
	}
	return c
}

// Name is the connection's name.
func (c *Connection) Name() string { return c.d.Name }

// PerUser reports whether each principal has their own credential.
func (c *Connection) PerUser() bool { return c.oauth == nil || c.oauth.PerUser }

// IsOAuth reports a connection people authorize (auth.oauth).
func (c *Connection) IsOAuth() bool { return c.oauth != nil }

// sharedPrincipal holds a connection that serves every caller.
const sharedPrincipal = "shared:toold"

// principal is the vault name the connection's tokens of who are under.
func (c *Connection) principal(who *auth.Identity) (string, error) {
	if c.oauth != nil && !c.oauth.PerUser {
		return sharedPrincipal, nil
	}
	return c.m.opts.Vault.PrincipalOf(who)
}

// Credential is who's credential for a request made now: from memory when
// it is fresh, else from the store, refreshed when it is about to expire,
// exchanged or passed through as configured. A caller without a
// connection gets *AuthorizationRequired.
func (c *Connection) Credential(ctx context.Context, who *auth.Identity) (*Credential, error) {
	switch {
	case c.d.Passthrough:
		return c.passthrough(ctx, who)
	case c.d.Exchange != nil:
		return c.exchanged(ctx, who, "")
	}
	p, err := c.principal(who)
	if err != nil {
		return nil, err
	}
	if v, ok := c.cache.Load(p); ok {
		if cr := v.(*Credential); cr.fresh(c.m.now()) {
			c.m.opts.Vault.Used(ctx, who, credentials.KindOAuth, c.d.Name)
			return cr, nil
		}
	}
	cr, err := c.load(ctx, who, p, "")
	if err == nil {
		c.m.opts.Vault.Used(ctx, who, credentials.KindOAuth, c.d.Name)
	}
	return cr, err
}

// Rejected is called when the downstream refused cred with a 401: the
// credential is refreshed once (or exchanged again) and the new one
// returned; nil when nothing better can be had (the refusal stands).
// challenge is the 401's WWW-Authenticate values.
func (c *Connection) Rejected(ctx context.Context, who *auth.Identity, cred *Credential, challenge []string) (*Credential, error) {
	c.noteChallenge(challenge)
	switch {
	case c.d.Passthrough:
		return nil, nil
	case c.d.Exchange != nil:
		return c.exchanged(ctx, who, cred.Token)
	}
	p, err := c.principal(who)
	if err != nil {
		return nil, err
	}
	return c.load(ctx, who, p, cred.Token)
}

// noteChallenge keeps what a 401 said of where the resource's metadata is
// and what scope it needs, for discovery.
func (c *Connection) noteChallenge(values []string) {
	b := Bearer(ParseChallenges(values))
	if b == nil {
		return
	}
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if rm := b["resource_metadata"]; rm != "" && checkURL(rm, c.d.AllowHTTP) == nil {
		c.challenge = rm
	}
	if s := b["scope"]; s != "" && len(c.oauth.Scopes) == 0 && checkScopes(strings.Fields(s)) == nil {
		c.chScope = s
	}
}

func (c *Connection) lock(p string) func() {
	v, _ := c.locks.LoadOrStore(p, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// load reads who's tokens from the store and refreshes them when they are
// about to expire or when failed (the token a downstream refused) is
// still the one stored. One principal's loads take turns, so a burst of
// calls refreshes once.
func (c *Connection) load(ctx context.Context, who *auth.Identity, p, failed string) (*Credential, error) {
	defer c.lock(p)()
	now := c.m.now()
	if v, ok := c.cache.Load(p); ok {
		if cr := v.(*Credential); cr.fresh(now) && (failed == "" || cr.Token != failed) {
			return cr, nil
		}
	}
	v := c.m.opts.Vault
	tok, rev, err := v.Tokens(ctx, p, c.d.Name)
	if errors.Is(err, credentials.ErrMissing) {
		c.cache.Delete(p)
		return nil, c.required(who, "")
	}
	if err != nil {
		return nil, err
	}
	cr := credentialOf(tok)
	if cr.fresh(now) && cr.Token != failed {
		c.cache.Store(p, cr)
		return cr, nil
	}
	return c.refresh(ctx, who, p, tok, rev)
}

func credentialOf(t *credentials.Token) *Credential {
	return &Credential{Token: t.AccessToken, Header: "Bearer " + t.AccessToken, Expiry: t.Expiry}
}

// refresh trades the refresh token for new tokens and stores them at rev;
// when another replica refreshed first, theirs are used.
func (c *Connection) refresh(ctx context.Context, who *auth.Identity, p string, tok *credentials.Token, rev uint64) (*Credential, error) {
	v := c.m.opts.Vault
	if tok.RefreshToken == "" {
		_ = v.DeleteTokens(ctx, p, c.d.Name)
		c.cache.Delete(p)
		return nil, c.required(who, "the access token expired and the authorization server gave no refresh token")
	}
	md, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
	if tok.Resource != "" {
		form.Set("resource", tok.Resource)
	}
	ca, err := c.client(ctx, md)
	if err != nil {
		return nil, err
	}
	g, err := requestToken(ctx, c.d.Client, md.TokenEndpoint, ca, form, c.m.now)
	var te *TokenError
	if errors.As(err, &te) && te.InvalidGrant() {
		// Spent, revoked or expired at the server: another replica may
		// have refreshed with it a moment ago.
		if again, rev2, err2 := v.Tokens(ctx, p, c.d.Name); err2 == nil && rev2 != rev && credentialOf(again).fresh(c.m.now()) {
			cr := credentialOf(again)
			c.cache.Store(p, cr)
			return cr, nil
		}
		_ = v.DeleteTokens(ctx, p, c.d.Name)
		c.cache.Delete(p)
		c.m.log.Info("an OAuth connection ended at its authorization server", zap.String("connection", c.d.Name), zap.String("code", te.OAuthError), zap.String("description", te.Description))
		return nil, c.required(who, "the authorization expired or was revoked at the authorization server")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: refreshing the connection %q: %v", ErrUnavailable, c.d.Name, err)
	}
	next := *tok
	next.AccessToken, next.Expiry, next.RefreshedAt = g.AccessToken, g.Expiry, c.m.now().UTC()
	if g.RefreshToken != "" {
		next.RefreshToken = g.RefreshToken
	}
	if g.Scopes != nil {
		next.Scopes = g.Scopes
	}
	if _, err := v.SaveTokens(ctx, p, c.d.Name, &next, rev); errors.Is(err, credentials.ErrChanged) {
		if again, _, err2 := v.Tokens(ctx, p, c.d.Name); err2 == nil {
			cr := credentialOf(again)
			c.cache.Store(p, cr)
			return cr, nil
		}
	} else if err != nil {
		return nil, err
	}
	cr := credentialOf(&next)
	c.cache.Store(p, cr)
	return cr, nil
}

// Required is the consent step for who, with why (a downstream that
// refused their token even after a refresh).
func (c *Connection) Required(who *auth.Identity, reason string) error {
	return c.required(who, reason)
}

// required is the consent step for who.
func (c *Connection) required(who *auth.Identity, reason string) error {
	if reason == "" {
		reason = "the caller has not connected it yet"
	}
	e := &AuthorizationRequired{Connection: c.d.Name, Reason: reason, Shared: !c.PerUser()}
	if e.Shared {
		return e // only an admin connects it (GET /connections/{name}/authorize): no link for any caller
	}
	if u, err := c.m.startURL(who, c.d.Name); err == nil {
		e.URL = u
	}
	return e
}

// metadata discovers (once, then kept for an hour) the authorization
// server: for an MCP server through its protected resource metadata, else
// the configured issuer's.
func (c *Connection) metadata(ctx context.Context) (*ServerMetadata, error) {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if c.meta != nil {
		return c.meta, nil
	}
	if c.m.now().Sub(c.metaFailed) < 5*time.Second {
		return nil, fmt.Errorf("%w (the last attempt failed a moment ago)", ErrUnavailable)
	}
	md, scopes, err := c.discover(ctx)
	if err != nil {
		c.metaFailed = c.m.now()
		c.m.log.Warn("the authorization server of a connection could not be discovered", zap.String("connection", c.d.Name), zap.Error(err))
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	c.meta = md
	if len(c.scopes) == 0 {
		c.scopes = scopes
	}
	if slices.Contains(md.ScopesSupported, "offline_access") && !slices.Contains(c.scopes, "offline_access") {
		c.scopes = append(c.scopes, "offline_access") // a refresh token, where the server asks for the scope
	}
	return md, nil
}

func (c *Connection) discover(ctx context.Context) (*ServerMetadata, []string, error) {
	issuer := c.oauth.Issuer
	var scopes []string
	if c.chScope != "" {
		scopes = strings.Fields(c.chScope)
	}
	if c.d.MCP {
		prm, err := fetchResourceMetadata(ctx, c.d.Client, c.d.URL, c.challenge, c.d.AllowHTTP)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case issuer == "":
			issuer = prm.AuthorizationServers[0]
		case !slices.Contains(prm.AuthorizationServers, issuer):
			return nil, nil, fmt.Errorf("the server names the authorization servers %v, not the configured issuer %s", prm.AuthorizationServers, issuer)
		}
		if scopes == nil && len(prm.ScopesSupported) > 0 {
			scopes = prm.ScopesSupported
		}
	}
	md, err := fetchServerMetadata(ctx, c.d.Client, issuer, c.d.AllowHTTP)
	return md, scopes, err
}

// client is how toold authenticates at the server: as configured, else
// the client it registered (RFC 7591), registering it now if needed.
func (c *Connection) client(ctx context.Context, md *ServerMetadata) (clientAuth, error) {
	if c.oauth.ClientID != "" {
		return clientAuth{id: c.oauth.ClientID, secret: c.oauth.ClientSecret}, nil
	}
	v := c.m.opts.Vault
	redirect := c.m.CallbackURL()
	if rc, err := v.RegisteredClient(ctx, c.d.Name); err == nil && rc.Issuer == md.Issuer && rc.RedirectURI == redirect {
		return clientAuth{id: rc.ID, secret: rc.Secret}, nil
	}
	if md.RegistrationEndpoint == "" {
		return clientAuth{}, fmt.Errorf("the connection %q has no client_id, and its authorization server %s offers no dynamic registration: "+
			"register toold there (redirect URI %s) and set auth.oauth.client_id", c.d.Name, md.Issuer, redirect)
	}
	id, secret, err := register(ctx, c.d.Client, md.RegistrationEndpoint, redirect, c.scopes)
	if err != nil {
		return clientAuth{}, fmt.Errorf("registering toold at %s: %w", md.Issuer, err)
	}
	if err := v.SaveClient(ctx, c.d.Name, &credentials.Client{Issuer: md.Issuer, RedirectURI: redirect, ID: id, Secret: secret}); err != nil {
		return clientAuth{}, err
	}
	c.m.log.Info("registered toold as a client of an authorization server", zap.String("connection", c.d.Name), zap.String("issuer", md.Issuer))
	return clientAuth{id: id, secret: secret}, nil
}

// Forget drops who's credential from this replica's memory (a
// disconnection).
func (c *Connection) Forget(who *auth.Identity) {
	if p, err := c.principal(who); err == nil {
		c.cache.Delete(p)
	}
}
