package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/confirm"
)

// ConfirmationsBucket holds the confirmation tokens already used.
const ConfirmationsBucket = "toold_confirmations"

// MaxTokenLife is the longest a used token is remembered (the bucket's
// age limit, a backstop behind each key's own TTL): a token that would
// outlive it is refused rather than remembered too briefly.
const MaxTokenLife = time.Hour

// clockSkew is added to each used token's TTL. A token's expiry was set by
// the clock of the replica that issued it, the TTL runs on the NATS
// server's, and any replica's clock decides whether the token is still
// valid: the record must outlast the token on all of them.
const clockSkew = time.Minute

func (s *Store) confirmationsBucket(ctx context.Context) (*Bucket, error) {
	// Per-key TTLs (KeyTTL) need the bucket's limit markers; a marker is
	// what lets Create reuse an expired key. A use is decided by Create
	// alone: no read needs the leader.
	return s.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: ConfirmationsBucket,
		Description: "toold confirmation tokens already used", TTL: MaxTokenLife}, kvOpts{keyTTL: true})
}

// CredentialsBucket holds principals' credentials, sealed by
// internal/credentials before they reach the store.
const CredentialsBucket = "toold_credentials"

func (s *Store) credentialsBucket(ctx context.Context) (*Bucket, error) {
	// An authorization in progress expires by its own TTL.
	return s.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: CredentialsBucket, Description: "toold credentials, sealed"},
		kvOpts{keyTTL: true, leaderReads: true})
}

// CreateTTL stores a value only if the key does not exist (ErrConflict),
// and deletes it after ttl (whole seconds, at least one).
func (b *Bucket) CreateTTL(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	start := time.Now()
	rev, err := b.kv.Create(ctx, key, value, jetstream.KeyTTL(keyTTL(ttl)))
	return rev, b.done("create", start, err)
}

// PutTTL stores a value whatever was there, expiring after ttl (whole
// seconds, at least one): the key's own TTL, which a later put replaces.
// The KV API sets a TTL on Create only; a put is a publish to the key's
// subject, and the message TTL is the same header. Needs the bucket's
// limit markers (kvOpts.keyTTL).
func (b *Bucket) PutTTL(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	start := time.Now()
	ack, err := b.js.Publish(ctx, "$KV."+b.name+"."+key, value, jetstream.WithMsgTTL(keyTTL(ttl)))
	if err != nil {
		return 0, b.done("put", start, err)
	}
	return ack.Sequence, b.done("put", start, nil)
}

// keyTTL is a key's TTL as JetStream takes it: whole seconds, at least one.
func keyTTL(ttl time.Duration) time.Duration { return max(ttl.Round(time.Second), time.Second) }

// SpentTokens is the ledger of used confirmation tokens that every replica
// shares: a token's first use creates its key, atomically on the server,
// so of two replicas spending one token at once exactly one succeeds, and
// a restarted replica still finds it.
type SpentTokens struct {
	b *Bucket
}

var _ confirm.Ledger = (*SpentTokens)(nil)

// SpentTokens returns the store's ledger of used confirmation tokens.
func (s *Store) SpentTokens() *SpentTokens { return &SpentTokens{b: s.confirmations} }

// Spend records id as used by spender until expires (plus the clock skew
// allowance); confirm.ErrUsed when some replica recorded it first, unless
// for the same non-empty spender (an execution run again).
func (t *SpentTokens) Spend(ctx context.Context, id string, expires time.Time, spender string) error {
	ttl := time.Until(expires) + clockSkew
	if ttl > MaxTokenLife {
		return fmt.Errorf("state: a confirmation token valid for %v outlives the %v its use is remembered", ttl.Round(time.Second), MaxTokenLife)
	}
	_, err := t.b.CreateTTL(ctx, id, []byte(spender), ttl)
	if !errors.Is(err, ErrConflict) {
		return err
	}
	if spender != "" {
		by, _, gerr := t.b.Get(ctx, id)
		if gerr == nil && string(by) == spender {
			return nil
		}
	}
	return confirm.ErrUsed
}
