package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
)

// The session cookie: the access token a person signed in with, and the
// session's CSRF token, sealed (seal.go); where the issuer gave a refresh
// token, a flag saying so — the refresh token itself stays server-side
// (refresh.go). It is HttpOnly (no script reads
// it), SameSite=Strict (no other site's page sends it), Secure and
// __Host- prefixed outside loopback (only over https, only for this host,
// path /), and lives no longer than its token (or, with a refresh token,
// than session_ttl). A request it authenticates
// that is not a GET carries the CSRF token in X-CSRF-Token, which only a
// page that read GET /auth/session could know: it is bound to the session
// the cookie seals.
const (
	sessionCookie       = "toold_session"
	secureSessionCookie = "__Host-toold_session"
	// CSRFHeader carries a session's CSRF token on every request that is
	// not a GET (or HEAD, or OPTIONS).
	CSRFHeader        = "X-CSRF-Token"
	defaultSessionTTL = 8 * time.Hour
)

// sessionState is what the session cookie carries. ID names the session
// for its revocation (revoke.go); a cookie without one (sealed by an
// older toold) is not a session.
type sessionState struct {
	ID     string `json:"sid"`
	Issuer string `json:"iss"`
	// Token is the access token the session began with; a session with
	// Refresh uses the newest one its server-side record holds, and this
	// one only where the record is missing.
	Token   string `json:"tok"`
	CSRF    string `json:"csrf"`
	Expires int64  `json:"exp"`
	// Refresh says the session's refresh token is kept server-side
	// (refresh.go): the cookie never carries it.
	Refresh bool `json:"rt,omitempty"`
}

// Session is a signed-in person's session.
type Session struct {
	Principal *auth.Principal
	// CSRF is the token a request that is not a GET must carry.
	CSRF    string
	Expires time.Time
	// id names the session for SignOut; si is its issuer's client, and
	// refresh says it has a refresh token to revoke.
	id      string
	si      *signIn
	refresh bool
}

// SessionCookieName is the session cookie's name: __Host- prefixed when
// it is Secure.
func SessionCookieName(secure bool) string {
	if secure {
		return secureSessionCookie
	}
	return sessionCookie
}

// newSession seals a session for the tokens a sign-in ended with. Without
// a refresh token the session is good until the earlier of its TTL and
// until: when the access token stops being good (its exp, or for an opaque
// token the end of the window its introspection is trusted for), and is
// never renewed past it. With one, the refresh token is kept server-side
// (refresh.go) and the session lasts its TTL, its access token refreshed
// as it runs out; if the record cannot be written, the session falls back
// to the access token's own life.
func (v *Verifier) newSession(ctx context.Context, si *signIn, tok *tokenAnswer, until time.Time, secure bool) (*http.Cookie, error) {
	now := v.now()
	ttl := si.cfg.SessionTTL
	if ttl == 0 {
		ttl = defaultSessionTTL
	}
	st := sessionState{ID: random(), Issuer: si.is.cfg.Issuer, Token: tok.AccessToken, CSRF: random(), Expires: now.Add(ttl).Unix()}
	if tok.RefreshToken != "" {
		if err := v.putTokens(ctx, si, st.ID, newTokens(tok, "", now), time.Unix(st.Expires, 0)); err != nil {
			v.log.Warn("a session's refresh token could not be kept: the session ends with its access token", zap.Error(err))
		} else {
			st.Refresh = true
		}
	}
	if !st.Refresh && until.Unix() < st.Expires {
		st.Expires = until.Unix()
	}
	name := SessionCookieName(secure)
	value, err := si.sealer.seal(name, st)
	if err != nil {
		return nil, err
	}
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: max(1, int(st.Expires-now.Unix())), HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteStrictMode}, nil
}

// Session reads the request's session cookie and verifies its token as
// any bearer token is (so a token that expired, or whose key the issuer
// dropped, ends the session — unless the session has a refresh token,
// which brings a new one: refresh.go), and that it was not signed out
// (revoke.go). It returns nil and no error when the request has no
// session, or one that is no longer good; an error when the issuer or the
// record of sign-outs cannot be reached.
func (v *Verifier) Session(ctx context.Context, r *http.Request, secure bool) (*Session, error) {
	if v == nil || len(v.signins) == 0 {
		return nil, nil
	}
	c, err := r.Cookie(SessionCookieName(secure))
	if err != nil {
		return nil, nil
	}
	for _, si := range v.signins {
		var st sessionState
		if si.sealer.open(c.Name, c.Value, &st) != nil || st.Issuer != si.is.cfg.Issuer {
			continue
		}
		if v.now().Unix() >= st.Expires || st.ID == "" {
			return nil, nil
		}
		if revoked, err := v.revoked.Revoked(ctx, revocationKey(st.ID)); err != nil {
			v.log.Warn("a session could not be checked against the signed-out ones", zap.Error(err))
			return nil, ErrRevocationsUnavailable
		} else if revoked {
			return nil, nil
		}
		var p *auth.Principal
		if st.Refresh {
			p, err = v.refreshedPrincipal(ctx, si, &st)
		} else {
			p, _, err = v.authenticate(ctx, st.Token)
		}
		var oe *Error
		if errors.As(err, &oe) && !oe.Unavailable {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, nil
		}
		return &Session{Principal: p, CSRF: st.CSRF, Expires: time.Unix(st.Expires, 0), id: st.ID, si: si, refresh: st.Refresh}, nil
	}
	return nil, nil
}

// CheckCSRF reports whether a request authenticated by the session may
// go on: a GET, HEAD or OPTIONS always; anything else only with the
// session's CSRF token in X-CSRF-Token.
func (s *Session) CheckCSRF(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}

// ClearSession is the cookie that ends a session in the browser.
func ClearSession(secure bool) *http.Cookie {
	return &http.Cookie{Name: SessionCookieName(secure), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode}
}

// ClearLogin are the cookies that end a sign-in's state once used: the
// login cookie and the browser cookie it was bound to.
func ClearLogin(secure bool) []*http.Cookie {
	return []*http.Cookie{
		{Name: loginCookie, Value: "", Path: CallbackPath, MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode},
		{Name: BrowserCookieName(secure), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode},
	}
}
