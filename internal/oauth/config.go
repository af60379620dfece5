package oauth

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/netguard"
)

// Config is one trusted issuer (auth.oauth, or one entry of its list).
type Config struct {
	// Issuer is the authorization server's issuer identifier; its OpenID
	// discovery document is at {issuer}/.well-known/openid-configuration
	// (or RFC 8414's oauth-authorization-server).
	Issuer string `yaml:"issuer" validate:"required"`
	// Audience is the resource tokens must be issued for (RFC 8707): a
	// token whose aud does not hold it is refused. It is the resource the
	// protected resource metadata names.
	Audience string `yaml:"audience" validate:"required"`
	// Allow and AllowHTTP are the outbound guard's policy for the issuer,
	// its JWKS, token and introspection endpoints: internal hosts that
	// may be reached, and plain http (a loopback test IdP).
	Allow     []string `yaml:"allow"`
	AllowHTTP bool     `yaml:"allow_http"`
	// Tools are the patterns a token's subject may use unless ToolClaims
	// narrow them.
	Tools []string `yaml:"tools" validate:"dive,required"`
	// Algorithms are the JWS algorithms accepted; asymmetric only. Empty:
	// RS256-512, PS256-512, ES256-512 and EdDSA.
	Algorithms []string `yaml:"algorithms"`
	// Skew is the clock skew allowed on exp, nbf and iat (default 30s).
	Skew time.Duration `yaml:"skew" validate:"gte=0,lte=10m"`
	// Roles maps each role to the scope values, or values of RolesClaim,
	// that grant it; a role left out keeps its default, the scope
	// "toold:<role>".
	Roles map[string][]string `yaml:"roles"`
	// RolesClaim is a claim whose values grant roles through Roles too,
	// such as "groups", "roles" or "realm_access.roles" (a dotted path).
	RolesClaim string `yaml:"roles_claim"`
	// GroupsClaim is the claim (a name or a dotted path) whose values are
	// the subject's groups, which policies read as principal.groups
	// (default "groups"; "-" reads none).
	GroupsClaim string `yaml:"groups_claim"`
	// ToolClaims narrow Tools by claims: when any entry is configured, a
	// subject may use only the tools of the entries its token matches
	// (and none if it matches none).
	ToolClaims []ToolClaim `yaml:"tool_claims" validate:"dive"`
	// Introspection checks opaque tokens at the issuer (RFC 7662).
	Introspection Introspection `yaml:"introspection"`
	// Console signs people in to the console with this issuer.
	Console Console `yaml:"console"`
}

// ToolClaim grants tool patterns to the tokens whose claim holds a value.
type ToolClaim struct {
	// Claim is a claim name or a dotted path; Value one of its values.
	Claim string   `yaml:"claim" validate:"required"`
	Value string   `yaml:"value" validate:"required"`
	Tools []string `yaml:"tools" validate:"min=1,dive,required"`
}

// Introspection is how toold asks the issuer about a token that is not a
// JWT. Off unless ClientID is set.
type Introspection struct {
	// URL defaults to the discovery document's introspection_endpoint.
	URL          string `yaml:"url"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// CacheFor bounds how long an active answer is trusted before the
	// issuer is asked again (default 60s; never past the token's exp).
	CacheFor time.Duration `yaml:"cache_for" validate:"gte=0"`
	// AudienceOptional accepts an answer that holds no aud. Off, such an
	// answer is refused: an issuer that answers every client about every
	// token would otherwise let in a token issued to another resource.
	// Turn it on only for an issuer that answers only the clients a token
	// is for (RFC 7662 §4), and introspect as toold's own client.
	AudienceOptional bool `yaml:"audience_optional"`
}

// Console is the console's single sign-on client (authorization code with
// PKCE). Off unless ClientID is set.
type Console struct {
	ClientID string `yaml:"client_id"`
	// ClientSecret makes it a confidential client (client_secret_basic);
	// empty, a public one.
	ClientSecret string `yaml:"client_secret"`
	// Scopes asked for; default openid, the four toold scopes and, where
	// the issuer lists it, offline_access (a refresh token: refresh.go).
	Scopes []string `yaml:"scopes"`
	// RedirectURL is toold's /auth/callback as the IdP knows it; empty
	// derives it from the request (http on loopback, https elsewhere).
	RedirectURL string `yaml:"redirect_url" validate:"omitempty,url"`
	// SessionSecret seals the session cookies (32+ characters); replicas
	// behind one name share it. Empty: a random one per process (sessions
	// end at a restart).
	SessionSecret string `yaml:"session_secret" validate:"omitempty,min=32"`
	// SessionTTL bounds a session (default 8h); without a refresh token,
	// never past its access token's expiry.
	SessionTTL time.Duration `yaml:"session_ttl" validate:"gte=0"`
}

// Issuers is auth.oauth: one issuer, written as a mapping, or a list of
// them.
type Issuers []Config

// UnmarshalYAML accepts a mapping (one issuer) or a sequence.
func (is *Issuers) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var c Config
		if err := n.Decode(&c); err != nil {
			return err
		}
		*is = Issuers{c}
		return nil
	}
	var list []Config
	if err := n.Decode(&list); err != nil {
		return err
	}
	*is = list
	return nil
}

// defaultAlgorithms are the asymmetric JWS algorithms accepted unless
// configured otherwise.
var defaultAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// Check reports every problem of the issuers, as "path: message" lines
// (EachProblem), for config.Validate.
func (is Issuers) Check() error {
	var ps problems
	seen := map[string]bool{}
	for i, c := range is {
		at := fmt.Sprintf("%d.", i)
		if len(is) == 1 {
			at = ""
		}
		if seen[c.Issuer] {
			ps.add(at+"issuer", "%q is configured twice", c.Issuer)
		}
		seen[c.Issuer] = true
		c.check(&ps, at)
	}
	return ps.orNil()
}

func (c *Config) check(ps *problems, at string) {
	if u, err := url.Parse(c.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		ps.add(at+"issuer", "%q is not an issuer URL such as https://idp.example.com/realms/main", c.Issuer)
	} else if u.Scheme == "http" && !c.AllowHTTP {
		ps.add(at+"issuer", "%q is plain http; set allow_http (a loopback test IdP only) or use https", c.Issuer)
	} else {
		c.checkReach(ps, at, "issuer", u)
	}
	if in := c.Introspection.URL; in != "" {
		if u, err := url.Parse(in); err != nil || u.Host == "" {
			ps.add(at+"introspection.url", "%q is not a URL", in)
		} else {
			c.checkReach(ps, at, "introspection.url", u)
		}
	}
	if strings.ContainsAny(c.Audience, " \t\r\n\"") {
		ps.add(at+"audience", "%q holds spaces or quotes", c.Audience)
	}
	for _, pat := range c.Tools {
		if _, err := path.Match(pat, ""); err != nil {
			ps.add(at+"tools", "pattern %q is malformed", pat)
		}
	}
	if _, err := algorithms(c.Algorithms); err != nil {
		ps.add(at+"algorithms", "%v", err)
	}
	for role := range c.Roles {
		if !slices.Contains(auth.Roles, auth.Role(role)) {
			ps.add(at+"roles", "%q is not a role (roles: %v)", role, auth.Roles)
		}
	}
	for j, tc := range c.ToolClaims {
		for _, pat := range tc.Tools {
			if _, err := path.Match(pat, ""); err != nil {
				ps.add(fmt.Sprintf("%stool_claims.%d.tools", at, j), "pattern %q is malformed", pat)
			}
		}
	}
	if in := c.Introspection; in.ClientID == "" && (in.URL != "" || in.ClientSecret != "") {
		ps.add(at+"introspection.client_id", "is required to introspect tokens")
	}
}

// checkReach reports, without any network traffic, a URL of the issuer
// that the outbound guard of its allow and allow_http will refuse at
// start: an address literal or a name (localhost) that is not public and
// not allowed. A name that resolves to such an address is found only when
// it is reached; the warning then names the key too.
func (c *Config) checkReach(ps *problems, at, key string, u *url.URL) {
	g, err := netguard.New(netguard.Policy{Allow: c.Allow, AllowHTTP: c.AllowHTTP})
	if err != nil {
		ps.add(at+"allow", "%v", err)
		return
	}
	var refused *netguard.RefusedError
	if err := g.CheckURL(u); errors.As(err, &refused) {
		if u.Scheme == "http" && !c.AllowHTTP {
			return // reported on its own
		}
		why, _, _ := strings.Cut(refused.Reason, "; add it")
		ps.add(at+"allow", "the %s %s is refused by the outbound guard (%s); %s", key, u.Redacted(), why, AllowHint(u.Hostname()))
	}
}

// AllowHint is how to let toold reach host, an issuer's: the key to set.
func AllowHint(host string) string {
	return fmt.Sprintf("set auth.oauth.allow: [%s] if the issuer is meant to be there", host)
}

// algorithms resolves the configured algorithm names: known asymmetric
// JWS algorithms only, never "none" nor an HMAC (whose key a resource
// server would share with every client, or take from a public key).
func algorithms(names []string) ([]jose.SignatureAlgorithm, error) {
	if len(names) == 0 {
		return defaultAlgorithms, nil
	}
	var out []jose.SignatureAlgorithm
	var errs []error
	for _, n := range names {
		a := jose.SignatureAlgorithm(n)
		if !slices.Contains(defaultAlgorithms, a) {
			errs = append(errs, fmt.Errorf("%q is not an asymmetric JWS algorithm (one of %v)", n, defaultAlgorithms))
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// problems collects configuration problems, each at a path under
// auth.oauth.
type problems struct{ list []problem }

type problem struct{ path, message string }

func (p *problems) add(at, format string, args ...any) {
	p.list = append(p.list, problem{at, fmt.Sprintf(format, args...)})
}

func (p *problems) orNil() error {
	if len(p.list) == 0 {
		return nil
	}
	return p
}

func (p *problems) Error() string {
	lines := make([]string, len(p.list))
	for i, q := range p.list {
		lines[i] = q.path + ": " + q.message
	}
	return strings.Join(lines, "\n")
}

// EachProblem lets config report each problem at its path.
func (p *problems) EachProblem(f func(path, message string)) {
	for _, q := range p.list {
		f(q.path, q.message)
	}
}
