package oauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/oauth/oidctest"
)

// The resource the tests' tokens are for.
const resource = "http://toold.test/mcp"

var (
	agent    = oidctest.Client{ID: "agent", Secret: "agent-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{resource}}
	opaque   = oidctest.Client{ID: "opaque", Secret: "opaque-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{resource}, Opaque: true}
	noAud    = oidctest.Client{ID: "opaque-no-aud", Secret: "no-aud-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{resource}, Opaque: true, IntrospectWithoutAud: true}
	other    = oidctest.Client{ID: "other", Secret: "other-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{"https://elsewhere.test/mcp"}}
	alice    = oidctest.User{ID: "u-alice", Username: "alice", Password: "alice-pw", Groups: []string{"approvers", "readers"}}
	bob      = oidctest.User{ID: "u-bob", Username: "bob", Password: "bob-pw"}
	provided = oidctest.Config{Clients: []oidctest.Client{agent, opaque, noAud, other}, Users: []oidctest.User{alice, bob}}
)

// setup starts a provider and a verifier trusting it.
func setup(t *testing.T, adjust ...func(*Config)) (*oidctest.Provider, *Verifier, *clock, *prometheus.Registry) {
	t.Helper()
	p := startProvider(t)
	c := Config{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true, Tools: []string{"*"}}
	for _, f := range adjust {
		f(&c)
	}
	clk := &clock{}
	reg := prometheus.NewRegistry()
	v, err := New(Options{Issuers: Issuers{c}, Registerer: reg, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return p, v, clk, reg
}

func startProvider(t testing.TB) *oidctest.Provider { return oidctest.Start(t, provided) }

// clock is time.Now moved by an offset, so a test can pass a token's exp
// without waiting for it.
type clock struct{ offset time.Duration }

func (c *clock) now() time.Time { return time.Now().Add(c.offset) }

// TestProviderTokens: the provider's tokens name their principal: a
// user's (signed in with the authorization code flow) and a client's own
// (client credentials), with the roles their scopes grant and the client
// that acts.
func TestProviderTokens(t *testing.T) {
	p, v, _, _ := setup(t)
	user := p.SignIn(agent, alice, "openid", "toold:call", "toold:approve").AccessToken
	pr, err := v.Authenticate(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	// groups_claim's default: the groups claim, which policies read.
	want := auth.Identity{Kind: auth.KindToken, Name: "u-alice@" + p.Issuer, Issuer: p.Issuer, Subject: "u-alice", Client: "agent",
		Groups: alice.Groups}
	if !reflect.DeepEqual(pr.Identity, want) {
		t.Errorf("identity %+v, want %+v", pr.Identity, want)
	}
	if !pr.Has(auth.RoleCall) || !pr.Has(auth.RoleApprove) || pr.Has(auth.RoleAdmin) || pr.Has(auth.RoleObserve) {
		t.Errorf("roles %v", pr.Roles())
	}
	own := p.ClientCredentials(agent, "toold:observe").AccessToken
	pr, err = v.Authenticate(context.Background(), own)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Subject != "agent" || !pr.Has(auth.RoleObserve) || pr.Has(auth.RoleCall) {
		t.Errorf("client credentials: %+v %v", pr.Identity, pr.Roles())
	}
}

// TestDelegation: a token an agent backend got for a user by token
// exchange (RFC 8693) names the user as subject and the backend as actor.
func TestDelegation(t *testing.T) {
	p, v, _, _ := setup(t)
	user := p.SignIn(agent, alice, "openid", "toold:call").AccessToken
	backend := p.ClientCredentials(agent, "toold:call").AccessToken
	onBehalf := p.Exchange(agent, user, backend, resource, "toold:call").AccessToken
	pr, err := v.Authenticate(context.Background(), onBehalf)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Subject != "u-alice" || pr.Actor != "agent" || pr.Client != "agent" || !pr.Has(auth.RoleCall) {
		t.Errorf("delegated: %+v %v", pr.Identity, pr.Roles())
	}
}

// TestRolesAndToolsFromClaims: the role mapping reads a claim (groups)
// beside the scopes, and tool_claims narrow the issuer's tools to those of
// the entries a token matches, or to none.
func TestRolesAndToolsFromClaims(t *testing.T) {
	p, v, _, _ := setup(t, func(c *Config) {
		c.RolesClaim = "groups"
		c.Roles = map[string][]string{"approve": {"approvers"}}
		c.Tools = []string{"read_*", "grep", "echo"}
		c.ToolClaims = []ToolClaim{{Claim: "groups", Value: "readers", Tools: []string{"read_file"}},
			{Claim: "scope", Value: "toold:admin", Tools: []string{"*"}}}
	})
	for _, tt := range []struct {
		user   oidctest.User
		scopes []string
		roles  []auth.Role
		may    []string
		mayNot []string
	}{
		{alice, []string{"toold:call", "toold:approve"}, []auth.Role{auth.RoleCall, auth.RoleApprove}, []string{"read_file"}, []string{"grep", "read_dir", "write_file"}},
		{bob, []string{"toold:call", "toold:approve"}, []auth.Role{auth.RoleCall}, nil, []string{"read_file", "grep"}},
		{bob, []string{"toold:admin"}, []auth.Role{auth.RoleAdmin}, []string{"read_file", "grep", "echo"}, []string{"write_file"}},
	} {
		t.Run(tt.user.Username+" "+strings.Join(tt.scopes, " "), func(t *testing.T) {
			pr, err := v.Authenticate(context.Background(), p.SignIn(agent, tt.user, append([]string{"openid"}, tt.scopes...)...).AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.Roles(); !slices.Equal(got, tt.roles) {
				t.Errorf("roles %v, want %v", got, tt.roles)
			}
			for _, tool := range tt.may {
				if !pr.Allows(tool) || !v.AllowsToken(&pr.Identity, tool) {
					t.Errorf("may not use %s", tool)
				}
			}
			for _, tool := range tt.mayNot {
				if pr.Allows(tool) || v.AllowsToken(&pr.Identity, tool) {
					t.Errorf("may use %s", tool)
				}
			}
		})
	}
}

// TestRefusals: every token attack the resource server must refuse, each
// made from a real token of the provider (or its published key), and each
// refused as invalid_token, not as the issuer's fault.
func TestRefusals(t *testing.T) {
	p, v, clk, _ := setup(t)
	stranger := oidctest.Start(t, provided) // another issuer, same clients
	good := p.ClientCredentials(agent, "toold:call").AccessToken
	if _, err := v.Authenticate(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	header, claims := decode(t, good)
	kid := header["kid"].(string)
	ownKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, tt := range []struct {
		name, token, why string
		later            time.Duration
	}{
		{"wrong audience", p.ClientCredentials(other, "toold:call").AccessToken, "not issued for this resource", 0},
		{"wrong issuer", stranger.ClientCredentials(agent, "toold:call").AccessToken, "is not trusted", 0},
		{"expired", good, "expired", 10 * time.Minute},
		{"alg none", unsigned(header, claims), "accepted algorithm", 0},
		{"HS256 keyed with the RSA public key", hmacWithPublicKey(t, p, kid, claims), "accepted algorithm", 0},
		{"unknown kid", sign(t, ownKey, "made-up-kid", claims), "publishes no key", 0},
		{"a key the issuer never published", sign(t, ownKey, kid, claims), "does not verify", 0},
		{"claims changed after signing", swapPayload(good, with(claims, "sub", "u-bob")), "does not verify", 0},
		{"an ID token's typ", sign(t, ownKey, kid, claims, "logout+jwt"), "not an access token", 0},
		{"not a JWT", "opaque-token-nobody-introspects", "not a JWT", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk.offset = tt.later
			defer func() { clk.offset = 0 }()
			_, err := v.Authenticate(context.Background(), tt.token)
			var e *Error
			if !errors.As(err, &e) || e.Unavailable || !strings.Contains(e.Description, tt.why) {
				t.Fatalf("got %v, want an invalid token (%q)", err, tt.why)
			}
			if strings.Contains(e.Description, tt.token) {
				t.Error("the refusal quotes the token")
			}
		})
	}
}

// TestRotationWithoutRestart: a token signed with a key the provider
// rotated to is accepted at once (its unknown kid refreshes the keys);
// once the old key is no longer published, its tokens stop being accepted
// even from the cache.
func TestRotationWithoutRestart(t *testing.T) {
	p, v, _, reg := setup(t)
	before := p.ClientCredentials(agent, "toold:call").AccessToken
	if _, err := v.Authenticate(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	p.Rotate(false)
	after := p.ClientCredentials(agent, "toold:call").AccessToken
	if kid(t, after) == kid(t, before) {
		t.Fatal("the provider did not rotate")
	}
	for _, tok := range []string{after, before} {
		if _, err := v.Authenticate(context.Background(), tok); err != nil {
			t.Fatalf("after rotation: %v", err)
		}
	}
	p.Rotate(true) // the old keys are gone
	latest := p.ClientCredentials(agent, "toold:call").AccessToken
	if _, err := v.Authenticate(context.Background(), latest); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(context.Background(), before); err == nil {
		t.Error("a token of a key the issuer dropped is still accepted")
	}
	if n := fetches(t, reg, p.Issuer, "jwks"); n != 3 {
		t.Errorf("%v JWKS fetches, want 3 (the first, and one per new kid)", n)
	}
}

// TestUnknownKidFlood: a flood of tokens naming made-up kids refreshes
// the keys a bounded number of times, not once per token.
func TestUnknownKidFlood(t *testing.T) {
	p, v, _, reg := setup(t)
	_, claims := decode(t, p.ClientCredentials(agent, "toold:call").AccessToken)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	for i := range 200 {
		if _, err := v.Authenticate(context.Background(), sign(t, key, fmt.Sprintf("kid-%d", i), claims)); err == nil {
			t.Fatal("a made-up kid was accepted")
		}
	}
	if n := fetches(t, reg, p.Issuer, "jwks"); n > 1+refreshBurst {
		t.Errorf("%v JWKS fetches for 200 made-up kids, want at most %d", n, 1+refreshBurst)
	}
}

// TestIntrospection: an opaque token is asked about at the issuer's
// introspection endpoint (the provider answers a client the token is for,
// so toold introspects as one); one the issuer does not know is refused.
func TestIntrospection(t *testing.T) {
	p, v, _, _ := setup(t, func(c *Config) {
		c.Introspection = Introspection{ClientID: opaque.ID, ClientSecret: opaque.Secret}
	})
	tok := p.SignIn(opaque, alice, "openid", "toold:call").AccessToken
	if looksLikeJWT(tok) {
		t.Fatal("the web client's token is a JWT")
	}
	pr, err := v.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Subject != "u-alice" || !pr.Has(auth.RoleCall) || pr.Has(auth.RoleApprove) {
		t.Errorf("introspected: %+v %v", pr.Identity, pr.Roles())
	}
	if _, err := v.Authenticate(context.Background(), "not-a-token-the-issuer-made"); err == nil {
		t.Error("an unknown opaque token was accepted")
	}
}

// TestIntrospectionWithoutAudience: an introspection answer that names no
// aud says nothing of whom the token was issued for, so it is refused —
// unless the issuer's introspection.audience_optional says the IdP judged
// the audience itself. An answer naming another resource is refused
// either way.
func TestIntrospectionWithoutAudience(t *testing.T) {
	for _, tt := range []struct {
		name     string
		client   oidctest.Client
		optional bool
		refusal  string // "" accepted
	}{
		{"no aud, not optional", noAud, false, "names no aud"},
		{"no aud, optional", noAud, true, ""},
		{"aud named", opaque, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, v, _, _ := setup(t, func(c *Config) {
				c.Introspection = Introspection{ClientID: tt.client.ID, ClientSecret: tt.client.Secret, AudienceOptional: tt.optional}
			})
			tok := p.SignIn(tt.client, alice, "openid", "toold:call").AccessToken
			pr, err := v.Authenticate(context.Background(), tok)
			switch {
			case tt.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refusal == "" && pr.Subject != "u-alice":
				t.Fatalf("principal %+v", pr.Identity)
			case tt.refusal != "" && (err == nil || !strings.Contains(err.Error(), tt.refusal) || !strings.Contains(err.Error(), "audience_optional")):
				t.Fatalf("got %v, want a refusal saying %q and naming audience_optional", err, tt.refusal)
			}
		})
	}
	// An answer naming another resource is refused, audience_optional or not.
	p, v, _, _ := setup(t, func(c *Config) {
		c.Audience = "https://elsewhere.test/other"
		c.Introspection = Introspection{ClientID: opaque.ID, ClientSecret: opaque.Secret, AudienceOptional: true}
	})
	if _, err := v.Authenticate(context.Background(), p.SignIn(opaque, alice, "openid", "toold:call").AccessToken); err == nil ||
		!strings.Contains(err.Error(), "not issued for this resource") {
		t.Fatalf("a token for another resource: %v", err)
	}
}

// TestIssuerUnreachable: when the issuer cannot be asked the refusal says
// so (the token may be good), rather than calling the token invalid.
func TestIssuerUnreachable(t *testing.T) {
	p, v, _, _ := setup(t)
	token := p.ClientCredentials(agent, "toold:call").AccessToken
	p.Stop() // before toold fetched its keys
	_, err := v.Authenticate(context.Background(), token)
	var e *Error
	if !errors.As(err, &e) || !e.Unavailable {
		t.Fatalf("got %v, want the issuer unavailable", err)
	}
}

func fetches(t *testing.T, reg *prometheus.Registry, issuer, what string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	_ = testutil.ToFloat64 // the registry is read whole below
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "toold_oauth_issuer_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["issuer"] == issuer && labels["what"] == what {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func decode(t *testing.T, tok string) (map[string]any, map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	var h, c map[string]any
	for i, v := range []*map[string]any{&h, &c} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, v) != nil {
			t.Fatalf("part %d of the token: %v", i, err)
		}
	}
	return h, c
}

func kid(t *testing.T, tok string) string {
	h, _ := decode(t, tok)
	return h["kid"].(string)
}

func enc(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func with(claims map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for kk, vv := range claims {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// unsigned is the token with alg "none" and no signature.
func unsigned(header, claims map[string]any) string {
	return enc(with(header, "alg", "none")) + "." + enc(claims) + "."
}

func swapPayload(tok string, claims map[string]any) string {
	parts := strings.Split(tok, ".")
	return parts[0] + "." + enc(claims) + "." + parts[2]
}

// hmacWithPublicKey is the algorithm-confusion attack: HS256 with the
// issuer's published RSA key as the HMAC secret, its JWK as served.
func hmacWithPublicKey(t *testing.T, p *oidctest.Provider, kid string, claims map[string]any) string {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(p.JWKS(), &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("the provider's JWKS: %v", err)
	}
	secret, _ := set.Keys[0].MarshalJSON()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret},
		(&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return signed(t, signer, claims)
}

// sign signs claims with key, naming kid (and typ, "JWT" unless given).
func sign(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any, typ ...string) string {
	t.Helper()
	ty := jose.ContentType("JWT")
	if len(typ) > 0 {
		ty = jose.ContentType(typ[0])
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithHeader("kid", kid).WithType(ty))
	if err != nil {
		t.Fatal(err)
	}
	return signed(t, signer, claims)
}

func signed(t *testing.T, signer jose.Signer, claims map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(claims)
	jws, err := signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
