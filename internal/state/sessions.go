package state

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RevokedSessionsBucket holds the console sessions signed out, each key
// until the session it names would have expired (internal/oauth,
// revoke.go).
const RevokedSessionsBucket = "toold_sessions_revoked"

func (s *Store) revokedSessionsBucket(ctx context.Context) (*Bucket, error) {
	// Each key's own TTL ends it with its session; a sign-out is read
	// back at once, on any replica.
	return s.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: RevokedSessionsBucket, Description: "toold console sessions signed out"},
		kvOpts{keyTTL: true, leaderReads: true})
}

// RevokedSessions is the record of signed-out console sessions that every
// replica shares: a session revoked on one is refused on all of them,
// until it would have expired anyway.
type RevokedSessions struct{ b *Bucket }

// RevokedSessions returns the store's record of signed-out sessions.
func (s *Store) RevokedSessions() *RevokedSessions { return &RevokedSessions{b: s.revokedSessions} }

// Revoke records id as signed out until until (plus the clock skew
// allowance: any replica's clock decides whether the session is still
// good, and the record must outlast it on all of them).
func (r *RevokedSessions) Revoke(ctx context.Context, id string, until time.Time) error {
	_, err := r.b.CreateTTL(ctx, id, []byte{'1'}, time.Until(until)+clockSkew)
	if errors.Is(err, ErrConflict) {
		return nil // signed out already
	}
	return err
}

// Revoked reports whether id was signed out; an error when the record
// cannot be read.
func (r *RevokedSessions) Revoked(ctx context.Context, id string) (bool, error) {
	_, _, err := r.b.Get(ctx, id)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// SessionTokensBucket holds console sessions' refresh tokens, sealed by
// internal/oauth with the session key (the store sees opaque values), each
// key until its session ends (internal/oauth, refresh.go).
const SessionTokensBucket = "toold_sessions_tokens"

func (s *Store) sessionTokensBucket(ctx context.Context) (*Bucket, error) {
	// Each key lives as long as its session; a refresh is read back at
	// once, on any replica.
	return s.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: SessionTokensBucket, Description: "toold console sessions' refresh tokens, sealed"},
		kvOpts{keyTTL: true, leaderReads: true})
}

// SessionTokens is where every replica finds a console session's refresh
// token (sealed): a session signed in on one replica refreshes on any, and
// a refresh on one is what the next request reads on another.
type SessionTokens struct {
	b *Bucket
}

// SessionTokens returns the store's record of sessions' refresh tokens.
func (s *Store) SessionTokens() *SessionTokens { return &SessionTokens{b: s.sessionTokens} }

// Put records value under key until until (plus the clock skew
// allowance), replacing what was there.
func (t *SessionTokens) Put(ctx context.Context, key, value string, until time.Time) error {
	_, err := t.b.PutTTL(ctx, key, []byte(value), time.Until(until)+clockSkew)
	return err
}

// Get returns the value under key; ok false when there is none.
func (t *SessionTokens) Get(ctx context.Context, key string) (string, bool, error) {
	v, _, err := t.b.Get(ctx, key)
	switch {
	case err == nil:
		return string(v), true, nil
	case errors.Is(err, ErrNotFound):
		return "", false, nil
	}
	return "", false, err
}

// Delete forgets key.
func (t *SessionTokens) Delete(ctx context.Context, key string) error {
	err := t.b.Delete(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
