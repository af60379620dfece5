package delegate_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/oauth/oidctest"
	"github.com/toold/toold/internal/state"
)

var (
	alice   = oidctest.User{ID: "u-alice", Username: "alice", Password: "alice-pw"}
	bob     = oidctest.User{ID: "u-bob", Username: "bob", Password: "bob-pw"}
	idAlice = &auth.Identity{Kind: auth.KindToken, Name: "u-alice@idp", Issuer: "idp", Subject: "u-alice"}
	idBob   = &auth.Identity{Kind: auth.KindToken, Name: "u-bob@idp", Issuer: "idp", Subject: "u-bob"}
)

// world is a real OpenID Provider, a resource that names it in its
// protected resource metadata, and a Manager with a vault in a real
// embedded store.
type world struct {
	idp      *oidctest.Provider
	resource string // the MCP endpoint
	m        *delegate.Manager
	vault    *credentials.Vault
	key      string
	clock    atomic.Int64 // seconds added to the real clock
	client   oidctest.Client
	agent    oidctest.Client
}

func newWorld(t *testing.T, extra ...oidctest.Client) *world {
	t.Helper()
	w := &world{key: credentials.NewKey()}
	w.client = oidctest.Client{ID: "toold-up", RedirectURIs: []string{"http://127.0.0.1:*/connections/callback"}, ResourceAudience: true, AccessTTL: 600}
	w.agent = oidctest.Client{ID: "agent", Secret: "agent-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{"https://toold.test/mcp"}}
	w.idp = oidctest.Start(t, oidctest.Config{Clients: append([]oidctest.Client{w.client, w.agent}, extra...), Users: []oidctest.User{alice, bob}})
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	w.resource = srv.URL + "/mcp"
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"resource": w.resource, "authorization_servers": []string{w.idp.Issuer},
			"scopes_supported": []string{"toold:call"}})
	})
	st, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kr, err := credentials.NewKeyring(w.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Now().Add(time.Duration(w.clock.Load()) * time.Second) }
	w.vault, err = credentials.New(context.Background(), credentials.Options{KV: st.Credentials, NotFound: state.ErrNotFound,
		Conflict: state.ErrConflict, Keys: kr, Local: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	w.m, err = delegate.New(delegate.Options{Vault: w.vault, Keys: kr, PublicURL: "http://127.0.0.1:9", Now: now, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func guarded(t *testing.T) *http.Client {
	g, err := netguard.New(netguard.Policy{Allow: []string{"127.0.0.1"}, AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return g.Client()
}

// connect runs the consent step as a person's browser would: the start
// URL a refusal names, the provider's login, the callback.
func (w *world) connect(t *testing.T, conn *delegate.Connection, who *auth.Identity, u oidctest.User) *delegate.Connected {
	t.Helper()
	_, err := conn.Credential(context.Background(), who)
	var ar *delegate.AuthorizationRequired
	if !errors.As(err, &ar) || ar.URL == "" {
		t.Fatalf("before connecting: %v, want AuthorizationRequired with a URL", err)
	}
	done, err := w.finish(t, ar.URL, u, true)
	if err != nil {
		t.Fatalf("finishing: %v", err)
	}
	return done
}

func (w *world) finish(t *testing.T, startURL string, u oidctest.User, sameBrowser bool) (*delegate.Connected, error) {
	t.Helper()
	su, _ := url.Parse(startURL)
	authURL, cookie, err := w.m.Begin(context.Background(), su.Query().Get("flow"), false)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	back := w.idp.Authorize(u, authURL)
	if !strings.HasSuffix(back.Path, delegate.CallbackPath) {
		t.Fatalf("the provider sent the browser to %s", back)
	}
	req := httptest.NewRequest(http.MethodGet, back.String(), nil)
	if sameBrowser {
		req.AddCookie(cookie)
	}
	return w.m.Finish(context.Background(), req, false)
}

// claims decodes a JWT's payload (the provider signed it; the test reads
// what it says).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	if err != nil || json.Unmarshal(b, &c) != nil {
		t.Fatalf("the payload: %v", err)
	}
	return c
}

func aud(c map[string]any) []string {
	switch v := c["aud"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, a := range v {
			s, _ := a.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// TestTwoPrincipalsConnect: the MCP authorization rules end to end with a
// real provider: discovery through the resource's metadata, dynamic
// registration (no client_id configured), the code flow with PKCE and the
// resource indicator. Two principals connect and each gets a token of
// their own subject, for the resource; a third is asked to authorize.
func TestTwoPrincipalsConnect(t *testing.T) {
	w := newWorld(t)
	conn, err := w.m.Add(delegate.Downstream{Name: "up", URL: w.resource, MCP: true, OAuth: &delegate.OAuthConfig{PerUser: true},
		Client: guarded(t), AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	var audits []string
	_ = audits
	for _, tt := range []struct {
		who  *auth.Identity
		user oidctest.User
	}{{idAlice, alice}, {idBob, bob}} {
		done := w.connect(t, conn, tt.who, tt.user)
		if done.Connection != "up" || done.WhoName != tt.who.Name {
			t.Errorf("connected: %+v", done)
		}
		cred, err := conn.Credential(context.Background(), tt.who)
		if err != nil {
			t.Fatal(err)
		}
		c := claims(t, cred.Token)
		if c["sub"] != tt.user.ID || strings.Join(aud(c), " ") != w.resource {
			t.Errorf("%s's token: sub %v aud %v, want %s for %s", tt.user.Username, c["sub"], aud(c), tt.user.ID, w.resource)
		}
		if cred.Header != "Bearer "+cred.Token {
			t.Errorf("header %q", cred.Header)
		}
	}
	if !strings.HasPrefix(fmtClient(t, w), "dcr-") {
		t.Errorf("no client was registered: %s", fmtClient(t, w))
	}
	_, err = conn.Credential(context.Background(), &auth.Identity{Kind: auth.KindKey, Name: "carol"})
	var ar *delegate.AuthorizationRequired
	if !errors.As(err, &ar) {
		t.Errorf("a third principal: %v", err)
	}
	list, err := w.m.List(context.Background(), idAlice)
	if err != nil || len(list) != 1 || !list[0].Connected || list[0].AuthorizeURL == "" || list[0].ExpiresAt.IsZero() {
		t.Errorf("alice's listing: %+v %v", list, err)
	}
}

func fmtClient(t *testing.T, w *world) string {
	c, err := w.vault.RegisteredClient(context.Background(), "up")
	if err != nil {
		return err.Error()
	}
	return c.ID
}

// TestRefreshRevokeAndReplay: a token about to expire is refreshed
// before use; a 401 refreshes once more; a disconnection revokes the
// refresh token at the provider (it no longer refreshes there); a state
// used once is refused the second time, and one finished in another
// browser (no binding cookie) is refused.
func TestRefreshRevokeAndReplay(t *testing.T) {
	w := newWorld(t)
	conn, err := w.m.Add(delegate.Downstream{Name: "up", URL: w.resource, MCP: true,
		OAuth: &delegate.OAuthConfig{PerUser: true, ClientID: w.client.ID}, Client: guarded(t), AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	w.connect(t, conn, idAlice, alice)
	ctx := context.Background()
	first, err := conn.Credential(ctx, idAlice)
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Store(3600) // past the access token's ten minutes
	second, err := conn.Credential(ctx, idAlice)
	if err != nil || second.Token == first.Token {
		t.Fatalf("after expiry: %v, same token %v", err, second != nil && second.Token == first.Token)
	}
	tok, _, err := w.vault.Tokens(ctx, credentials.Principal(idAlice), "up")
	if err != nil || tok.RefreshedAt.IsZero() || tok.AccessToken != second.Token {
		t.Fatalf("the stored tokens after a refresh: %v %v", tok.RefreshedAt, err)
	}
	third, err := conn.Rejected(ctx, idAlice, second, []string{`Bearer error="invalid_token"`})
	if err != nil || third == nil || third.Token == second.Token {
		t.Fatalf("after a 401: %v %v", third, err)
	}
	tok, _, _ = w.vault.Tokens(ctx, credentials.Principal(idAlice), "up")
	refresh := tok.RefreshToken
	if err := w.idp.Refresh(w.client, refresh); err != nil {
		t.Fatalf("the refresh token before the disconnection: %v", err)
	}
	tok, _, _ = w.vault.Tokens(ctx, credentials.Principal(idAlice), "up")
	_ = tok
	// The provider rotated the refresh token just now: read the one
	// stored after toold's refresh is spent; use the flow again.
	w.clock.Store(7200)
	fourth, err := conn.Credential(ctx, idAlice)
	var ar *delegate.AuthorizationRequired
	if !errors.As(err, &ar) {
		t.Fatalf("a refresh token spent elsewhere: %v %v, want AuthorizationRequired", fourth, err)
	}
	w.connect(t, conn, idAlice, alice)
	tok, _, _ = w.vault.Tokens(ctx, credentials.Principal(idAlice), "up")
	refresh = tok.RefreshToken
	if ok, err := w.m.Disconnect(ctx, idAlice, "up"); !ok || err != nil {
		t.Fatalf("disconnect: %v %v", ok, err)
	}
	if err := w.idp.Refresh(w.client, refresh); err == nil {
		t.Error("the refresh token still works at the provider after the disconnection")
	}
	if _, err := conn.Credential(ctx, idAlice); !errors.As(err, &ar) {
		t.Errorf("after the disconnection: %v", err)
	}

	// Replay and another browser.
	_, err = conn.Credential(ctx, idBob)
	errors.As(err, &ar)
	su, _ := url.Parse(ar.URL)
	authURL, cookie, err := w.m.Begin(ctx, su.Query().Get("flow"), false)
	if err != nil {
		t.Fatal(err)
	}
	back := w.idp.Authorize(bob, authURL)
	other := httptest.NewRequest(http.MethodGet, back.String(), nil)
	var ce *delegate.ConsentError
	if _, err := w.m.Finish(ctx, other, false); !errors.As(err, &ce) || ce.Reason != "other_browser" {
		t.Errorf("another browser: %v", err)
	}
	req := httptest.NewRequest(http.MethodGet, back.String(), nil)
	req.AddCookie(cookie)
	if _, err := w.m.Finish(ctx, req, false); err != nil {
		t.Fatalf("the browser that began it: %v", err)
	}
	again := httptest.NewRequest(http.MethodGet, back.String(), nil)
	again.AddCookie(cookie)
	if _, err := w.m.Finish(ctx, again, false); !errors.As(err, &ce) || ce.Reason != "used_or_expired" {
		t.Errorf("the same state again: %v", err)
	}
	forged := httptest.NewRequest(http.MethodGet, strings.Replace(back.String(), "state=", "state=x", 1), nil)
	if _, err := w.m.Finish(ctx, forged, false); !errors.As(err, &ce) || ce.Reason != "invalid_state" {
		t.Errorf("a made-up state: %v", err)
	}
}

// TestExchangeAndPassthrough: the caller's own token (issued for toold) is
// exchanged at the provider (RFC 8693) for one whose audience is the
// downstream and whose subject is still the caller, cached until expiry;
// passthrough forwards a token only to the downstream its aud names.
func TestExchangeAndPassthrough(t *testing.T) {
	exchanger := oidctest.Client{ID: "toold-x", Secret: "x-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Exchange: true}
	w := newWorld(t, exchanger)
	inbound := w.idp.SignIn(w.agent, alice, "openid").AccessToken
	conn, err := w.m.Add(delegate.Downstream{Name: "api", URL: "https://api.downstream.test/v1", Exchange: &delegate.ExchangeConfig{
		Issuer: w.idp.Issuer, Audience: "https://api.downstream.test", ClientID: exchanger.ID, ClientSecret: exchanger.Secret},
		Client: guarded(t), AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := delegate.WithInboundToken(context.Background(), inbound)
	cred, err := conn.Credential(ctx, idAlice)
	if err != nil {
		t.Fatal(err)
	}
	c := claims(t, cred.Token)
	if c["sub"] != alice.ID || !contains(aud(c), "https://api.downstream.test") || contains(aud(c), "https://toold.test/mcp") {
		t.Errorf("the exchanged token: sub %v aud %v", c["sub"], aud(c))
	}
	again, err := conn.Credential(context.Background(), idAlice) // cached: no inbound token needed now
	if err != nil || again.Token != cred.Token {
		t.Errorf("cached: %v", err)
	}
	var refused *delegate.Refused
	if _, err := conn.Credential(context.Background(), idBob); !errors.As(err, &refused) {
		t.Errorf("bob without a token: %v", err)
	}

	pass, err := w.m.Add(delegate.Downstream{Name: "pass", URL: "https://toold.test/mcp", Passthrough: true, Client: guarded(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pass.Credential(ctx, idAlice); err != nil || got.Token != inbound {
		t.Errorf("passthrough to the token's audience: %v", err)
	}
	elsewhere, _ := w.m.Add(delegate.Downstream{Name: "elsewhere", URL: "https://evil.test/mcp", Passthrough: true, Client: guarded(t)})
	if _, err := elsewhere.Credential(ctx, idAlice); !errors.As(err, &refused) {
		t.Errorf("passthrough to another downstream: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestSharedConnection: a connection every caller shares (per_user:
// false) offers no consent link to callers (only an admin's GET
// /connections/{name}/authorize makes one); once made, every caller's
// calls carry its token.
func TestSharedConnection(t *testing.T) {
	w := newWorld(t)
	conn, err := w.m.Add(delegate.Downstream{Name: "shared", URL: w.resource, MCP: true,
		OAuth: &delegate.OAuthConfig{ClientID: w.client.ID}, Client: guarded(t), AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Credential(context.Background(), idAlice)
	var ar *delegate.AuthorizationRequired
	if !errors.As(err, &ar) || !ar.Shared || ar.URL != "" {
		t.Fatalf("a caller of an unmade shared connection: %+v %v", ar, err)
	}
	link, err := w.m.AuthorizeURL(idAlice, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.finish(t, link, alice, true); err != nil {
		t.Fatal(err)
	}
	cred, err := conn.Credential(context.Background(), idBob)
	if err != nil || claims(t, cred.Token)["sub"] != alice.ID {
		t.Fatalf("bob's call over the shared connection: %v", err)
	}
}
