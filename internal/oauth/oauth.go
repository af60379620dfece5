// Package oauth makes toold an OAuth 2.1 resource server: it verifies the
// bearer tokens of trusted issuers (auth.oauth) and maps each to the
// caller it names, an auth.Principal. It also serves what MCP's
// authorization rules ask of a resource server (the RFC 9728 protected
// resource metadata, the WWW-Authenticate challenges), and signs people in
// to the console with the same issuers (login.go, session.go, refresh.go).
//
// The policy is toold's, and tested: a JWT access token (RFC 9068, and
// the shapes common IdPs write) must be signed with an asymmetric
// algorithm of the allow-list (never "none", never an HMAC, whatever key a
// token names) by a key the issuer publishes in its JWKS, found by kid; it
// must name the issuer (iss), this resource (aud, RFC 8707), a usable
// subject, and be within exp and nbf, with a small skew. A kid the keys
// lack refreshes them, at most a few times at once and then once per ten
// seconds, so a flood of made-up kids cannot hammer the IdP. A token that
// is not a JWT is asked about at the issuer's introspection endpoint (RFC
// 7662) where configured. The cryptography is go-jose's (v4): a JWS
// parser that takes the algorithm allow-list as an argument and verifies
// only with a key of the algorithm's type.
//
// Every request to an issuer (discovery, JWKS, introspection, the token
// endpoint) goes through the outbound guard, with the issuer's own policy
// (allow, allow_http). A verified token is kept until it expires, so a
// call with a token costs one map lookup more than a call with a key. A
// token is a credential for toold only: it is never logged, never written
// into an envelope, a record or an error, and never sent on.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/netguard"
)

// Options configure a Verifier.
type Options struct {
	Issuers    Issuers
	Registerer prometheus.Registerer
	Logger     *zap.Logger
	// Now is the clock (tests move it past a token's exp); nil is
	// time.Now.
	Now func() time.Time
}

// Verifier checks bearer tokens against the trusted issuers; safe for
// concurrent use.
type Verifier struct {
	issuers  []*issuer
	byIssuer map[string]*issuer
	algs     []jose.SignatureAlgorithm
	cache    *cache
	m        *metrics
	log      *zap.Logger
	now      func() time.Time
	// introspector asks about opaque tokens, if an issuer is configured
	// to: only one may be, or a token would be shown to issuers that did
	// not make it.
	introspector *issuer
	// signins are the issuers the console signs people in with.
	signins []*signIn
	// revoked records the sessions signed out (revoke.go).
	revoked Revocations
	// tokens keeps sessions' refresh tokens, sealed; locks serialises
	// each session's refreshes (refresh.go).
	tokens SessionTokens
	locks  sessionLocks
}

// New builds a Verifier; nil when no issuer is configured.
func New(o Options) (*Verifier, error) {
	if len(o.Issuers) == 0 {
		return nil, nil
	}
	if err := o.Issuers.Check(); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	v := &Verifier{byIssuer: map[string]*issuer{}, cache: newCache(), m: newMetrics(o.Registerer), log: o.Logger, now: o.Now,
		revoked: &RevokedInMemory{e: newExpiring[struct{}](o.Now)},
		tokens:  &SessionTokensInMemory{e: newExpiring[string](o.Now)}}
	for _, c := range o.Issuers {
		is, err := newIssuer(c, v.m, o.Now)
		if err != nil {
			return nil, fmt.Errorf("auth.oauth (%s): %w", c.Issuer, err)
		}
		is.onKeysDropped = func() { v.cache.forget(is) }
		v.issuers = append(v.issuers, is)
		v.byIssuer[c.Issuer] = is
		for _, a := range is.algs {
			if !slices.Contains(v.algs, a) {
				v.algs = append(v.algs, a)
			}
		}
		if c.Console.ClientID != "" {
			sealer, err := newSealer(c.Console.SessionSecret)
			if err != nil {
				return nil, err
			}
			v.signins = append(v.signins, &signIn{is: is, cfg: c.Console, sealer: sealer})
		}
		if c.Introspection.ClientID != "" {
			if v.introspector != nil {
				return nil, errors.New("auth.oauth: only one issuer may introspect opaque tokens (a token would be sent to issuers that did not make it)")
			}
			v.introspector = is
		}
	}
	return v, nil
}

// Error is why a token was refused.
type Error struct {
	// Unavailable says the issuer could not be asked (its metadata, keys
	// or introspection endpoint): the token may be good, retry later (503).
	// Otherwise the token is not valid (401, invalid_token).
	Unavailable bool
	// Description says why, for the client; it never quotes the token.
	Description string
}

func (e *Error) Error() string { return e.Description }

// Authenticate returns the principal a token names, or an *Error.
func (v *Verifier) Authenticate(ctx context.Context, raw string) (*auth.Principal, error) {
	p, _, err := v.authenticate(ctx, raw)
	return p, err
}

// authenticate is Authenticate, also saying until when the token is good.
func (v *Verifier) authenticate(ctx context.Context, raw string) (*auth.Principal, time.Time, error) {
	now := v.now()
	if e, ok := v.cache.get(raw, now); ok {
		v.m.cached.Inc()
		return e.p, e.until, nil
	}
	p, is, until, err := v.verify(ctx, raw, now)
	if err != nil {
		var te *tokenError
		if errors.As(err, &te) {
			v.m.tokens.WithLabelValues("invalid").Inc()
			return nil, time.Time{}, &Error{Description: te.msg}
		}
		v.m.tokens.WithLabelValues("unavailable").Inc()
		v.log.Warn("a token could not be verified: the issuer could not be asked", zap.Error(err))
		return nil, time.Time{}, &Error{Unavailable: true, Description: "the token's issuer could not be reached to verify it"}
	}
	v.m.tokens.WithLabelValues("valid").Inc()
	v.cache.put(raw, cached{p: p, until: until, is: is}, now)
	return p, until, nil
}

func (v *Verifier) verify(ctx context.Context, raw string, now time.Time) (*auth.Principal, *issuer, time.Time, error) {
	if !looksLikeJWT(raw) {
		if v.introspector == nil {
			return nil, nil, time.Time{}, invalid("the token is not a JWT, and no issuer is configured to introspect opaque tokens")
		}
		p, until, err := v.introspector.introspect(ctx, raw)
		return p, v.introspector, until, err
	}
	t, err := parseJWT(raw, v.algs)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	is := v.byIssuer[t.iss]
	if is == nil {
		return nil, nil, time.Time{}, invalid("the token's issuer %q is not trusted", clip(t.iss))
	}
	if !slices.Contains(is.algs, t.alg) {
		return nil, nil, time.Time{}, invalid("the algorithm %s is not accepted from %s", t.alg, is.cfg.Issuer)
	}
	keys, err := is.key(ctx, t.kid, t.alg)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	payload, err := t.verify(keys)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	c, err := parseClaims(payload)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	exp, err := is.checkClaims(c, now)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	return is.principal(c), is, exp, nil
}

// Warm fetches every issuer's metadata and keys in the background, so
// the first caller does not wait for them; failures are logged (a call
// will try again).
func (v *Verifier) Warm(ctx context.Context) {
	for _, is := range v.issuers {
		go func() {
			if err := is.refresh(ctx, 0); err != nil {
				var refused *netguard.RefusedError
				if errors.As(err, &refused) {
					// The guard, not the issuer: say which key lets it through.
					host := is.cfg.Issuer
					if u, perr := url.Parse(is.cfg.Issuer); perr == nil {
						host = u.Hostname()
					}
					v.log.Warn("the issuer cannot be reached: the outbound guard refuses it; "+AllowHint(host),
						zap.String("issuer", is.cfg.Issuer), zap.String("key", "auth.oauth.allow"), zap.String("reason", refused.Reason))
					return
				}
				v.log.Warn("the issuer's keys could not be fetched yet", zap.String("issuer", is.cfg.Issuer), zap.Error(err))
			}
		}()
	}
}

// AllowsToken reports whether a token's subject may still use a tool
// when a call it made runs later (an async execution, a resumed step):
// its issuer must still be trusted, and the tool must pass the issuer's
// tools as configured now and the narrowing its claims had.
func (v *Verifier) AllowsToken(id *auth.Identity, tool string) bool {
	if v == nil || id == nil {
		return false
	}
	is := v.byIssuer[id.Issuer]
	return is != nil && id.AllowsWithin(is.tools(), tool)
}
