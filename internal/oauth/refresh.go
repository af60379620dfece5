package oauth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
)

// Refresh tokens. Providers issue short access tokens (five minutes is
// common); a session that were only its access token would end with it.
// Where the issuer lists offline_access, the console's sign-in asks for it
// and keeps the refresh token it gets server-side, in a record keyed by
// the session's id and sealed with the session key (SessionTokens): the
// browser never holds it, not even sealed, and no log line, audit record
// or error quotes it. The session then lasts its session_ttl: a request
// whose access token is about to run out (30 s, or a quarter of a short
// lifetime, ahead) or was refused trades the refresh token for a new one,
// one request per session at a time (the others read the result); a
// refresh the issuer refuses (invalid_grant: revoked, expired, the person
// disabled) ends the session on the spot, as a sign-out would; an issuer
// that cannot be reached leaves a still-good token in use, and otherwise
// answers 503. Signing out deletes the record and revokes the refresh
// token at the issuer's revocation endpoint (RFC 7009) where it has one.

// offlineAccess is the scope that asks for a refresh token.
const offlineAccess = "offline_access"

// refreshAhead is how long before its expiry an access token is
// refreshed (a quarter of a shorter lifetime).
const refreshAhead = 30 * time.Second

// SessionTokens keeps what a session's refresh needs, sealed: the values
// it is handed are opaque (AES-256-GCM under the session key), so a store
// holds nothing usable without the key. Safe for concurrent use; keys are
// [0-9a-f].
type SessionTokens interface {
	// Put records value under key until until (the session's end).
	Put(ctx context.Context, key, value string, until time.Time) error
	// Get returns the value under key, ok false when there is none.
	Get(ctx context.Context, key string) (value string, ok bool, err error)
	// Delete forgets key.
	Delete(ctx context.Context, key string) error
}

// UseSessionTokens makes the verifier keep sessions' refresh tokens in t
// (a store every replica reads) instead of this process's memory. Call it
// before serving.
func (v *Verifier) UseSessionTokens(t SessionTokens) {
	if v != nil && t != nil {
		v.tokens = t
	}
}

// sessionTokens is a session's record: its newest access token, the
// refresh token, when the access token was issued and, where the issuer
// said (expires_in), when it expires: an opaque token's verification is
// trusted only for the introspection window, which says nothing of its
// own end.
type sessionTokens struct {
	Access  string `json:"at"`
	Refresh string `json:"rt"`
	Issued  int64  `json:"iat"`
	Expires int64  `json:"exp,omitempty"`
}

// newTokens is the record of a token endpoint's answer received at now;
// the refresh token kept is the answer's, or the one traded when the
// issuer does not rotate them.
func newTokens(tok *tokenAnswer, refresh string, now time.Time) *sessionTokens {
	rec := &sessionTokens{Access: tok.AccessToken, Refresh: cmp.Or(tok.RefreshToken, refresh), Issued: now.Unix()}
	if tok.ExpiresIn > 0 {
		rec.Expires = now.Unix() + tok.ExpiresIn
	}
	return rec
}

// errSessionEnded is a refresh the issuer refused: the session is over.
var errSessionEnded = errors.New("the issuer refused to refresh the session")

// tokensKey is what the record is kept under: a hash of the session's id,
// not the id (a store's keys give nothing a cookie could be matched
// against).
func tokensKey(id string) string {
	sum := sha256.Sum256([]byte("toold session tokens\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// putTokens seals and records a session's tokens until the session ends.
// The key is the sealing's additional data: a record moved to another
// session's key does not open.
func (v *Verifier) putTokens(ctx context.Context, si *signIn, id string, rec *sessionTokens, until time.Time) error {
	key := tokensKey(id)
	value, err := si.sealer.seal("toold session tokens "+key, rec)
	if err != nil {
		return err
	}
	return v.tokens.Put(ctx, key, value, until)
}

// getTokens reads a session's record: nil when there is none (or one this
// toold cannot open: sealed with another key).
func (v *Verifier) getTokens(ctx context.Context, si *signIn, id string) (*sessionTokens, error) {
	key := tokensKey(id)
	value, ok, err := v.tokens.Get(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	var rec sessionTokens
	if si.sealer.open("toold session tokens "+key, value, &rec) != nil || rec.Refresh == "" {
		return nil, nil
	}
	return &rec, nil
}

// refreshedPrincipal is the principal of a session with a refresh token:
// its record's access token, refreshed first when it is due or refused.
// Without a record (a replica that cannot read it, a restart of a toold
// without a store) the cookie's own token serves until it runs out. nil
// and no error: the session has ended.
func (v *Verifier) refreshedPrincipal(ctx context.Context, si *signIn, st *sessionState) (*auth.Principal, error) {
	rec, err := v.getTokens(ctx, si, st.ID)
	if err != nil {
		v.log.Warn("a session's record could not be read", zap.Error(err))
		return nil, &Error{Unavailable: true, Description: "the session's record could not be read"}
	}
	if rec == nil {
		p, _, err := v.authenticate(ctx, st.Token)
		return p, err
	}
	p, until, err := v.authenticate(ctx, rec.Access)
	var oe *Error
	if err != nil && (!errors.As(err, &oe) || oe.Unavailable) {
		return nil, err // the issuer's keys cannot be had: a new token would not verify either
	}
	if err == nil && !v.due(rec, until) {
		return p, nil
	}
	np, rerr := v.refresh(ctx, si, st, rec)
	switch {
	case rerr == nil:
		return np, nil
	case errors.Is(rerr, errSessionEnded):
		return nil, nil
	case err == nil:
		return p, nil // refreshing ahead failed for want of the issuer: the token is still good
	}
	return nil, &Error{Unavailable: true, Description: "the session's issuer could not be reached to refresh it"}
}

// due reports whether an access token verified good until until (or
// expiring when the issuer said) is to be refreshed now: within
// refreshAhead of its end, or a quarter of its lifetime for a shorter one.
func (v *Verifier) due(rec *sessionTokens, until time.Time) bool {
	if rec.Expires > rec.Issued {
		until = time.Unix(rec.Expires, 0)
	}
	ahead := min(refreshAhead, until.Sub(time.Unix(rec.Issued, 0))/4)
	return !v.now().Before(until.Add(-ahead))
}

// refresh trades the session's refresh token for new tokens, one request
// per session at a time: a request that waited finds the record another
// one refreshed, and uses it.
func (v *Verifier) refresh(ctx context.Context, si *signIn, st *sessionState, seen *sessionTokens) (*auth.Principal, error) {
	defer v.locks.lock(st.ID)()
	rec, err := v.getTokens(ctx, si, st.ID)
	if err != nil {
		return nil, errUnavailable
	}
	if rec == nil {
		return nil, errSessionEnded // ended meanwhile (signed out, or refused on another request)
	}
	if rec.Refresh != seen.Refresh {
		p, _, err := v.authenticate(ctx, rec.Access)
		return p, err
	}
	now := v.now()
	tok, err := si.tokenRequest(ctx, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.Refresh},
		"resource": {si.is.cfg.Audience}})
	var se *SignInError
	refused := errors.As(err, &se)
	if refused || errors.Is(err, errIssuerFailed) {
		// Another replica may have traded the same refresh token first:
		// the issuer refuses the second trade (or, some, fail on it).
		if again := v.rotatedElsewhere(ctx, si, st.ID, rec.Refresh); again != nil {
			p, _, err := v.authenticate(ctx, again.Access)
			return p, err
		}
	}
	if refused {
		v.log.Info("a console session ended: its issuer refused to refresh it", zap.String("issuer", si.is.cfg.Issuer),
			zap.String("code", se.Code))
		v.endSession(ctx, si, st)
		return nil, errSessionEnded
	}
	if err != nil {
		v.log.Warn("a console session could not be refreshed: the issuer could not be reached", zap.Error(err))
		return nil, err
	}
	p, _, err := v.authenticate(ctx, tok.AccessToken)
	if err != nil {
		var oe *Error
		if errors.As(err, &oe) && !oe.Unavailable {
			v.log.Info("a console session ended: its refreshed token is not one toold accepts", zap.String("reason", oe.Description))
			v.endSession(ctx, si, st)
			return nil, errSessionEnded
		}
		return nil, err
	}
	next := newTokens(tok, rec.Refresh, now)
	if err := v.putTokens(ctx, si, st.ID, next, time.Unix(st.Expires, 0)); err != nil {
		v.log.Warn("a refreshed session's tokens could not be kept", zap.Error(err))
	}
	return p, nil
}

// rotatedElsewhere is, after the issuer refused a refresh token, the
// record another replica wrote when it traded the same token first (the
// issuer rotates them: the second trade is refused), waited for a moment
// — the other replica may still be writing it; nil when the record still
// holds the refused token: the refusal is the issuer's word.
func (v *Verifier) rotatedElsewhere(ctx context.Context, si *signIn, id, refused string) *sessionTokens {
	for _, wait := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond} {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if rec, err := v.getTokens(ctx, si, id); err == nil && rec != nil && rec.Refresh != refused {
			return rec
		}
	}
	return nil
}

// endSession ends a session whose refresh was refused: its record goes,
// and its id is revoked, so the access token still sealed in its cookie
// opens nothing either.
func (v *Verifier) endSession(ctx context.Context, si *signIn, st *sessionState) {
	if err := v.tokens.Delete(ctx, tokensKey(st.ID)); err != nil {
		v.log.Warn("an ended session's record could not be deleted", zap.Error(err))
	}
	if err := v.revoked.Revoke(ctx, revocationKey(st.ID), time.Unix(st.Expires, 0)); err != nil {
		v.log.Warn("an ended session could not be recorded as revoked", zap.Error(err))
	}
}

// forgetTokens is a sign-out's end of the refresh token: the record is
// deleted and the token revoked at the issuer (RFC 7009), where it has a
// revocation endpoint. Failures are logged, never the token.
func (v *Verifier) forgetTokens(ctx context.Context, s *Session) {
	rec, err := v.getTokens(ctx, s.si, s.id)
	if err != nil {
		v.log.Warn("a signed-out session's record could not be read", zap.Error(err))
		return
	}
	if err := v.tokens.Delete(ctx, tokensKey(s.id)); err != nil {
		v.log.Warn("a signed-out session's record could not be deleted", zap.Error(err))
	}
	if rec == nil {
		return
	}
	d, err := s.si.is.metadata(ctx)
	if err != nil || d.RevocationEndpoint == "" {
		return
	}
	form := url.Values{"token": {rec.Refresh}, "token_type_hint": {"refresh_token"}}
	resp, err := s.si.post(ctx, d.RevocationEndpoint, form)
	s.si.is.m.fetch(s.si.is.cfg.Issuer, "revocation", err)
	if err != nil {
		v.log.Warn("a signed-out session's refresh token could not be revoked at its issuer", zap.Error(err))
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		v.log.Warn("the issuer refused to revoke a signed-out session's refresh token", zap.String("status", resp.Status))
	}
}

// sessionLocks serialises the refreshes of each session in this process.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock
}

type sessionLock struct {
	sync.Mutex
	users int
}

// lock locks id's refresh; the function returned unlocks it.
func (l *sessionLocks) lock(id string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sessionLock{}
	}
	sl := l.m[id]
	if sl == nil {
		sl = &sessionLock{}
		l.m[id] = sl
	}
	sl.users++
	l.mu.Unlock()
	sl.Lock()
	return func() {
		sl.Unlock()
		l.mu.Lock()
		if sl.users--; sl.users == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}

// SessionTokensInMemory keeps sessions' records in this process: a toold
// without a state store (one replica; sessions' refreshes end at a
// restart, and each session then lasts its last access token). Past
// maxRevoked sessions, the ended ones are dropped, and then a record is
// refused (its session then ends with its access token).
type SessionTokensInMemory struct {
	e *expiring[string]
}

// Put records value until until.
func (m *SessionTokensInMemory) Put(_ context.Context, key, value string, until time.Time) error {
	if !m.e.put(key, value, until) {
		return errors.New("oauth: too many sessions with refresh tokens at once to keep")
	}
	return nil
}

// Get returns the value under key, unless its session has ended.
func (m *SessionTokensInMemory) Get(_ context.Context, key string) (string, bool, error) {
	v, ok := m.e.get(key)
	return v, ok, nil
}

// Delete forgets key.
func (m *SessionTokensInMemory) Delete(_ context.Context, key string) error {
	m.e.forget(key)
	return nil
}
