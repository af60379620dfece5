// Package confirm guards dangerous tools with a confirmation step: the
// first call is answered with a token bound to the caller, the tool and a
// hash of the arguments; only the same call repeated with that token runs,
// once.
//
// A token is an HMAC with a random nonce, so it is checked without state;
// its single use is recorded in a Ledger. Two kinds of gate:
//
//   - Shared (toold with a state store): the secret is the configured one,
//     the ledger is the store every replica shares. Any replica accepts a
//     token any replica issued, and once it ran, none accepts it again:
//     not this replica, not another, not this one after a restart.
//   - New (no store): the key is derived afresh in every process and the
//     ledger is in memory, so tokens end with the process that issued
//     them. A restart cannot replay a token because the key that signed
//     it is gone.
package confirm

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"
)

// DefaultTTL is how long a token is valid.
const DefaultTTL = 5 * time.Minute

// Ledger records each token's single use.
type Ledger interface {
	// Spend records id as used by spender until expires. It returns
	// ErrUsed when id was recorded already, unless by the same non-empty
	// spender (an async execution run again after its replica died: the
	// one call the token confirmed, not a second one); any other error
	// means the use could not be recorded, and the token must not be
	// accepted.
	Spend(ctx context.Context, id string, expires time.Time, spender string) error
}

// Gate issues and checks tokens; safe for concurrent use.
type Gate struct {
	key    []byte
	kid    [kidSize]byte
	ttl    time.Duration
	now    func() time.Time
	ledger Ledger
}

// New builds a gate for one process: its key is derived from secret (or a
// random one) and a salt drawn now, and it remembers used tokens in
// memory. Its tokens end with the process.
func New(secret []byte, ttl time.Duration) *Gate {
	salt := random(32)
	if len(secret) == 0 {
		secret = random(32)
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("toold confirm process key\x00"))
	h.Write(salt)
	return newGate(h.Sum(nil), ttl, newMemory())
}

// Shared builds a gate whose tokens every gate with the same secret and
// the same ledger accepts, once. An empty secret makes a random one: the
// tokens then work on this process only.
func Shared(secret []byte, ttl time.Duration, ledger Ledger) *Gate {
	if len(secret) == 0 {
		secret = random(32)
	}
	return newGate(secret, ttl, ledger)
}

func newGate(key []byte, ttl time.Duration, ledger Ledger) *Gate {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	g := &Gate{key: key, ttl: ttl, now: time.Now, ledger: ledger}
	sum := sha256.Sum256(append([]byte("toold confirm key id\x00"), key...))
	copy(g.kid[:], sum[:])
	return g
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails since Go 1.24
	return b
}

// Errors Check returns. Their text is shown to the caller.
var (
	ErrMalformed = errors.New("the confirmation token is malformed")
	ErrForeign   = errors.New("the confirmation token was not issued by this toold (it restarted since, or its replicas do not share server.confirm_secret)")
	ErrExpired   = errors.New("the confirmation token has expired")
	ErrMismatch  = errors.New("the confirmation token was issued for another caller, tool or arguments")
	ErrUsed      = errors.New("the confirmation token was already used")
	// ErrUnrecorded: the ledger could not record the use (the state store
	// is unavailable), so the token was not accepted; it stays valid.
	ErrUnrecorded = errors.New("the use of the confirmation token could not be recorded; send the call again shortly")
)

// A token is kid | expiry | nonce | mac. The key id tells a token of
// another key (a previous process, a replica with another secret) from a
// forged one. The nonce makes two challenges for the same call in the same
// second different tokens, so using one does not spend the other.
const (
	kidSize   = 4
	nonceSize = 16
	tokenSize = kidSize + 8 + nonceSize + sha256.Size
)

// Issue returns a token for this caller, tool and arguments, and when it
// expires. args must be the canonical encoding of the arguments.
func (g *Gate) Issue(caller, tool string, args []byte) (string, time.Time) {
	exp := g.now().Add(g.ttl).Truncate(time.Second)
	buf := append(make([]byte, 0, tokenSize), g.kid[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(exp.Unix()))
	nonce := random(nonceSize)
	buf = append(buf, nonce...)
	return base64.RawURLEncoding.EncodeToString(append(buf, g.mac(caller, tool, args, exp, nonce)...)), exp
}

// Check accepts a token once, for exactly the call it was issued for. The
// use is recorded in the ledger before Check returns nil.
func (g *Gate) Check(ctx context.Context, caller, tool string, args []byte, token string) error {
	return g.CheckFor(ctx, caller, tool, args, token, "")
}

// CheckFor is Check for a call that may run more than once: an async
// execution, named by spender, whose replica died after the token was
// spent is run again with the same token, and is still the call the token
// confirmed. Any other call presenting it is refused.
func (g *Gate) CheckFor(ctx context.Context, caller, tool string, args []byte, token, spender string) error {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != tokenSize {
		return ErrMalformed
	}
	if !bytes.Equal(raw[:kidSize], g.kid[:]) {
		return ErrForeign
	}
	rest := raw[kidSize:]
	exp := time.Unix(int64(binary.BigEndian.Uint64(rest[:8])), 0)
	mac := rest[8+nonceSize:]
	want := g.mac(caller, tool, args, exp, rest[8:8+nonceSize])
	if subtle.ConstantTimeCompare(want, mac) != 1 {
		return ErrMismatch
	}
	if !g.now().Before(exp) {
		return ErrExpired
	}
	err = g.ledger.Spend(ctx, hex.EncodeToString(mac[:16]), exp, spender)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUsed):
		return ErrUsed
	}
	return &unrecorded{cause: err}
}

// unrecorded shows the caller ErrUnrecorded's text and keeps the cause
// for errors.Is (the store's error text is not the caller's business).
type unrecorded struct{ cause error }

func (e *unrecorded) Error() string   { return ErrUnrecorded.Error() }
func (e *unrecorded) Unwrap() []error { return []error{ErrUnrecorded, e.cause} }

func (g *Gate) mac(caller, tool string, args []byte, exp time.Time, nonce []byte) []byte {
	h := hmac.New(sha256.New, g.key)
	sum := sha256.Sum256(args)
	for _, part := range [][]byte{g.kid[:], []byte(caller), []byte(tool), sum[:], nonce} {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(part))))
		h.Write(part)
	}
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(exp.Unix())))
	return h.Sum(nil)
}
