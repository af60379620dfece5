package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"

	"github.com/toold/toold/internal/netguard"
)

// How the issuer's keys are kept: fetched on first use, again when a
// token names a kid they lack (at most refreshBurst times at once, then
// once per refreshEvery: a flood of made-up kids costs the IdP little),
// and again once they are older than keysMaxAge. A failed fetch is not
// retried for failedFor.
const (
	refreshEvery = 10 * time.Second
	refreshBurst = 2
	keysMaxAge   = time.Hour
	failedFor    = 5 * time.Second
	fetchTimeout = 10 * time.Second
	maxDocBytes  = 1 << 20
	maxKeys      = 64
)

// issuer is one trusted authorization server: its configuration, its
// discovery document and its signing keys.
type issuer struct {
	cfg      Config
	algs     []jose.SignatureAlgorithm
	client   *http.Client
	roles    map[string][]string // role -> values granting it
	cacheFor time.Duration       // introspection answers
	m        *metrics
	now      func() time.Time
	// onKeysDropped is called when a fetch no longer finds a key it had.
	onKeysDropped func()

	// fetch serialises fetches: callers who waited find the keys fresh.
	fetch   sync.Mutex
	limiter *rate.Limiter
	mu      sync.RWMutex
	meta    *discovery
	keys    map[string]jose.JSONWebKey // by kid; "" for keys without one
	fetched time.Time                  // when keys were last fetched
	gen     uint64                     // bumped by each successful fetch
	failed  time.Time                  // last failed fetch
}

// discovery is the part of the issuer's metadata toold uses.
type discovery struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
	// RevocationEndpoint (RFC 7009) is where a console sign-out revokes
	// the session's refresh token; ScopesSupported says whether to ask
	// for offline_access (a refresh token).
	RevocationEndpoint string   `json:"revocation_endpoint"`
	ScopesSupported    []string `json:"scopes_supported"`
}

func newIssuer(c Config, m *metrics, now func() time.Time) (*issuer, error) {
	g, err := netguard.New(netguard.Policy{Allow: c.Allow, AllowHTTP: c.AllowHTTP})
	if err != nil {
		return nil, err
	}
	algs, err := algorithms(c.Algorithms)
	if err != nil {
		return nil, err
	}
	client := g.Client()
	client.Timeout = fetchTimeout
	is := &issuer{cfg: c, algs: algs, client: client, roles: roleValues(c.Roles), m: m, now: now,
		limiter: rate.NewLimiter(rate.Every(refreshEvery), refreshBurst)}
	if c.Skew == 0 {
		is.cfg.Skew = 30 * time.Second
	}
	is.cacheFor = c.Introspection.CacheFor
	if is.cacheFor == 0 {
		is.cacheFor = time.Minute
	}
	return is, nil
}

// errUnavailable is the issuer's fault, not the token's: its metadata or
// keys could not be had.
var errUnavailable = errors.New("the issuer could not be reached")

// errIssuerFailed is an issuer that was reached and answered with a
// server error (5xx): always with errUnavailable. Some issuers answer so
// for a refresh token another replica traded first (the zitadel provider:
// "invalid refresh token", server_error), where most refuse invalid_grant.
var errIssuerFailed = errors.New("the issuer answered with a server error")

// metadata returns the discovery document, fetching it the first time
// (and again after a failure, at most every failedFor).
func (is *issuer) metadata(ctx context.Context) (*discovery, error) {
	is.mu.RLock()
	d, failed := is.meta, is.failed
	is.mu.RUnlock()
	if d != nil {
		return d, nil
	}
	if is.now().Sub(failed) < failedFor {
		return nil, errUnavailable
	}
	is.fetch.Lock()
	defer is.fetch.Unlock()
	if d := is.loadMeta(); d != nil {
		return d, nil
	}
	d, err := is.discover(ctx)
	is.mu.Lock()
	defer is.mu.Unlock()
	if err != nil {
		is.failed = is.now()
		is.m.fetch(is.cfg.Issuer, "discovery", err)
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	is.m.fetch(is.cfg.Issuer, "discovery", nil)
	is.meta = d
	return d, nil
}

func (is *issuer) loadMeta() *discovery {
	is.mu.RLock()
	defer is.mu.RUnlock()
	return is.meta
}

// discover reads OpenID discovery, or RFC 8414 metadata where there is
// none; the document must name the configured issuer exactly.
func (is *issuer) discover(ctx context.Context) (*discovery, error) {
	base := strings.TrimSuffix(is.cfg.Issuer, "/")
	u, err := url.Parse(is.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	candidates := []string{base + "/.well-known/openid-configuration",
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/")}
	var errs []error
	for _, c := range candidates {
		var d discovery
		if err := is.getJSON(ctx, c, &d); err != nil {
			errs = append(errs, err)
			continue
		}
		if d.Issuer != is.cfg.Issuer {
			return nil, fmt.Errorf("%s names the issuer %q, not %q", c, d.Issuer, is.cfg.Issuer)
		}
		return &d, nil
	}
	return nil, errors.Join(errs...)
}

// key finds the key that verifies a token of alg with kid. An unknown kid
// refreshes the keys, within the rate limit; an error wrapping
// errUnavailable means the keys could not be had at all.
func (is *issuer) key(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	keys, gen, stale := is.candidates(kid, alg)
	if len(keys) > 0 && !stale {
		return keys, nil
	}
	if gen != 0 && !stale && !is.limiter.Allow() {
		return nil, errUnknownKey(kid)
	}
	if err := is.refresh(ctx, gen); err != nil {
		if len(keys) > 0 { // stale but usable: keep serving with them
			return keys, nil
		}
		return nil, err
	}
	if keys, _, _ = is.candidates(kid, alg); len(keys) == 0 {
		return nil, errUnknownKey(kid)
	}
	return keys, nil
}

func errUnknownKey(kid string) error {
	return &tokenError{msg: fmt.Sprintf("the issuer publishes no key %q for it", clip(kid))}
}

// candidates are the keys a token of alg with kid may be verified with:
// the kid's, or without a kid every key fit for alg. gen is 0 before the
// first fetch; stale says the keys are older than keysMaxAge.
func (is *issuer) candidates(kid string, alg jose.SignatureAlgorithm) (out []jose.JSONWebKey, gen uint64, stale bool) {
	is.mu.RLock()
	defer is.mu.RUnlock()
	gen, stale = is.gen, is.gen != 0 && is.now().Sub(is.fetched) > keysMaxAge
	if kid != "" {
		if k, ok := is.keys[kid]; ok && fits(k, alg) {
			out = append(out, k)
		}
		return out, gen, stale
	}
	for _, k := range is.keys {
		if fits(k, alg) {
			out = append(out, k)
		}
	}
	return out, gen, stale
}

// refresh fetches the keys, unless another caller did since generation
// seen.
func (is *issuer) refresh(ctx context.Context, seen uint64) error {
	d, err := is.metadata(ctx)
	if err != nil {
		return err
	}
	is.fetch.Lock()
	defer is.fetch.Unlock()
	is.mu.RLock()
	gen, failed := is.gen, is.failed
	is.mu.RUnlock()
	if gen != seen {
		return nil
	}
	if is.now().Sub(failed) < failedFor {
		return errUnavailable
	}
	keys, err := is.fetchKeys(ctx, d.JWKSURI)
	is.mu.Lock()
	defer is.mu.Unlock()
	is.m.fetch(is.cfg.Issuer, "jwks", err)
	if err != nil {
		is.failed = is.now()
		return fmt.Errorf("%w: %v", errUnavailable, err)
	}
	dropped := false
	for kid := range is.keys {
		if _, ok := keys[kid]; !ok {
			dropped = true
		}
	}
	is.keys, is.fetched, is.gen = keys, is.now(), is.gen+1
	if dropped && is.onKeysDropped != nil {
		is.onKeysDropped()
	}
	return nil
}

// fetchKeys reads the JWKS. Keys toold cannot use are left out, one by
// one: symmetric ones (never a verification key of a resource server),
// encryption keys, private keys, malformed ones.
func (is *issuer) fetchKeys(ctx context.Context, uri string) (map[string]jose.JSONWebKey, error) {
	if uri == "" {
		return nil, errors.New("the issuer's metadata names no jwks_uri")
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := is.getJSON(ctx, uri, &set); err != nil {
		return nil, err
	}
	keys := map[string]jose.JSONWebKey{}
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if len(keys) >= maxKeys || k.UnmarshalJSON(raw) != nil || !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		keys[k.KeyID] = k
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no usable signing key", uri)
	}
	return keys, nil
}

// fits reports whether k may verify a signature of alg: the key's own alg
// if it names one, and a key type the algorithm is for.
func fits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false
	}
	switch {
	case strings.HasPrefix(string(alg), "RS"), strings.HasPrefix(string(alg), "PS"):
		return keyType(k) == "RSA"
	case strings.HasPrefix(string(alg), "ES"):
		return keyType(k) == "EC"
	case alg == jose.EdDSA:
		return keyType(k) == "OKP"
	}
	return false
}

// keyType is the JWK key type of a public key.
func keyType(k jose.JSONWebKey) string {
	switch k.Key.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "EC"
	case ed25519.PublicKey:
		return "OKP"
	}
	return ""
}

// getJSON GETs a document of the issuer through the outbound guard.
func (is *issuer) getJSON(ctx context.Context, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := is.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxDocBytes {
		return fmt.Errorf("GET %s: the document is larger than %d bytes", u, maxDocBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %v", u, err)
	}
	return nil
}
