package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"go.uber.org/zap"
)

// Signing out. A session cookie is sealed, so any copy of it is as good
// as the browser's own until it expires: clearing it in the browser that
// signs out ends nothing for a copy. POST /auth/logout therefore revokes
// the session itself: its id is recorded as revoked until the session
// would have expired, in the state store every replica reads (state's
// RevokedSessions), and every request a session authenticates is checked
// against that record. Without a store the record is this process's
// (RevokedInMemory): toold then runs as one replica.

// Revocations records revoked sessions until they would have expired;
// safe for concurrent use. Ids are opaque strings of [A-Za-z0-9_-].
type Revocations interface {
	// Revoke records id as revoked until the session it names expires.
	Revoke(ctx context.Context, id string, until time.Time) error
	// Revoked reports whether id was revoked. An error (the store cannot
	// be read) leaves the session unverified: it is refused.
	Revoked(ctx context.Context, id string) (bool, error)
}

// UseRevocations makes the verifier record and check revoked sessions in
// r (the state store's, shared by every replica) instead of this
// process's memory. Call it before serving.
func (v *Verifier) UseRevocations(r Revocations) {
	if v != nil && r != nil {
		v.revoked = r
	}
}

// ErrRevocationsUnavailable is a session that could not be checked
// against the revoked sessions, or a sign-out that could not be
// recorded: the store cannot be reached.
var ErrRevocationsUnavailable = errors.New("the record of signed-out sessions cannot be reached")

// SignOut revokes the session on every replica (as far as the
// revocations reach), until it would have expired; a session with a
// refresh token also loses its record, and the token is revoked at the
// issuer where it can be (refresh.go).
func (v *Verifier) SignOut(ctx context.Context, s *Session) error {
	if v == nil || s == nil {
		return nil
	}
	if err := v.revoked.Revoke(ctx, revocationKey(s.id), s.Expires); err != nil {
		v.log.Warn("a sign-out could not be recorded", zap.Error(err))
		return ErrRevocationsUnavailable
	}
	if s.refresh {
		v.forgetTokens(ctx, s)
	}
	return nil
}

// revocationKey is what the record keeps of a session id: its hash, so
// the store holds nothing a cookie could be matched against.
func revocationKey(id string) string {
	sum := sha256.Sum256([]byte("toold session\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// RevokedInMemory keeps revoked sessions in this process: the record of
// a toold without a state store. Past maxRevoked sessions, the expired ones
// are dropped, and then a sign-out is refused rather than a revocation
// forgotten.
type RevokedInMemory struct {
	e *expiring[struct{}]
}

// NewRevokedInMemory returns an empty record.
func NewRevokedInMemory() *RevokedInMemory { return &RevokedInMemory{e: newExpiring[struct{}](nil)} }

// Revoke records id until until.
func (m *RevokedInMemory) Revoke(_ context.Context, id string, until time.Time) error {
	if !m.e.put(id, struct{}{}, until) {
		return errors.New("oauth: too many sessions signed out at once to remember")
	}
	return nil
}

// Revoked reports whether id is recorded and the record has not expired.
func (m *RevokedInMemory) Revoked(_ context.Context, id string) (bool, error) {
	_, ok := m.e.get(id)
	return ok, nil
}
