// Package confirm guards dangerous tools with a confirmation step: the
// first call is answered with a token bound to the caller, the tool and a
// hash of the arguments; only the same call repeated with that token runs.
//
// Tokens are stateless HMACs, so any replica sharing the secret can verify
// them (stateless replicas stay stateless), and single-use: a replica
// remembers the tokens it has accepted until they expire, so a token cannot
// run the same call twice there.
package confirm

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sync"
	"time"
)

// DefaultTTL is how long a token is valid.
const DefaultTTL = 5 * time.Minute

// maxRemembered bounds the replay cache; past it, the oldest entries (which
// expire first) are dropped early — a dropped token is refused, never
// accepted, because acceptance needs a free entry.
const maxRemembered = 100_000

// Gate issues and checks tokens; safe for concurrent use.
type Gate struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time

	mu   sync.Mutex
	used map[string]time.Time // token MAC -> expiry
}

// New builds a gate. An empty secret makes a random one: tokens then work
// on this replica only.
func New(secret []byte, ttl time.Duration) *Gate {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret) // never fails since Go 1.24
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Gate{secret: secret, ttl: ttl, now: time.Now, used: map[string]time.Time{}}
}

// Errors Check returns.
var (
	ErrMalformed = errors.New("the confirmation token is malformed")
	ErrExpired   = errors.New("the confirmation token has expired")
	ErrMismatch  = errors.New("the confirmation token was issued for another caller, tool or arguments")
	ErrUsed      = errors.New("the confirmation token was already used")
)

// nonceSize is the random part of a token: two challenges for the same
// call in the same second get different tokens, so using one does not
// spend the other.
const nonceSize = 16

// Issue returns a token for this caller, tool and arguments, and when it
// expires. args must be the canonical encoding of the arguments.
func (g *Gate) Issue(caller, tool string, args []byte) (string, time.Time) {
	exp := g.now().Add(g.ttl).Truncate(time.Second)
	buf := binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
	nonce := make([]byte, nonceSize)
	_, _ = rand.Read(nonce)
	buf = append(buf, nonce...)
	return base64.RawURLEncoding.EncodeToString(append(buf, g.mac(caller, tool, args, exp, nonce)...)), exp
}

// Check accepts a token once, for exactly the call it was issued for.
func (g *Gate) Check(caller, tool string, args []byte, token string) error {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 8+nonceSize+sha256.Size {
		return ErrMalformed
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(raw[:8])), 0)
	mac := raw[8+nonceSize:]
	want := g.mac(caller, tool, args, exp, raw[8:8+nonceSize])
	if subtle.ConstantTimeCompare(want, mac) != 1 {
		return ErrMismatch
	}
	now := g.now()
	if !now.Before(exp) {
		return ErrExpired
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	key := string(mac)
	if _, seen := g.used[key]; seen {
		return ErrUsed
	}
	g.forget(now)
	if len(g.used) >= maxRemembered {
		return ErrUsed // cannot remember it: refuse rather than allow a replay
	}
	g.used[key] = exp
	return nil
}

// forget drops expired entries; g.mu must be held.
func (g *Gate) forget(now time.Time) {
	if len(g.used) < 1024 {
		return // cheap enough to keep; swept when it grows
	}
	for k, exp := range g.used {
		if !now.Before(exp) {
			delete(g.used, k)
		}
	}
}

func (g *Gate) mac(caller, tool string, args []byte, exp time.Time, nonce []byte) []byte {
	h := hmac.New(sha256.New, g.secret)
	sum := sha256.Sum256(args)
	for _, part := range [][]byte{[]byte(caller), []byte(tool), sum[:], nonce} {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(part))))
		h.Write(part)
	}
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(exp.Unix())))
	return h.Sum(nil)
}
