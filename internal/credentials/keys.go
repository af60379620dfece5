package credentials

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a credentials key: AES-256.
const KeySize = 32

// sealed records start with magic, then the id of the key that sealed them,
// then GCM's nonce: one version byte to grow by, and a key id so that
// opening never guesses among the keys.
const (
	magic     = "tc1"
	keyIDSize = 8
	nonceSize = 12
)

// NewKey returns a fresh credentials key: 32 random bytes, base64, as
// credentials.key takes it (`toold credentials keygen` prints one).
func NewKey() string {
	var b [KeySize]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(b[:])
}

// ParseKey reads a key written as base64 (standard or URL alphabet, padded
// or not) of exactly 32 bytes. Its error never quotes the value.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("the key is %d bytes, not %d (toold credentials keygen makes one)", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, errors.New("the key is not base64 (toold credentials keygen makes one)")
}

// Keyring seals records with the current key and opens records sealed with
// it or with one of the previous keys (rotation: a record opened with a
// previous key is sealed again with the current one).
type Keyring struct {
	raw      []byte
	current  key
	previous []key
}

type key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

func newKey(raw []byte) (key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	sum := sha256.Sum256(append([]byte("toold credentials key id\x00"), raw...))
	k := key{aead: aead}
	copy(k.id[:], sum[:])
	return k, nil
}

// NewKeyring builds a keyring from the current key and the previous ones
// (each as ParseKey reads it); errors name the key by its place, never its
// value.
func NewKeyring(current string, previous []string) (*Keyring, error) {
	raw, err := ParseKey(current)
	if err != nil {
		return nil, fmt.Errorf("credentials.key: %w", err)
	}
	kr := &Keyring{raw: raw}
	if kr.current, err = newKey(raw); err != nil {
		return nil, err
	}
	for i, p := range previous {
		raw, err := ParseKey(p)
		if err != nil {
			return nil, fmt.Errorf("credentials.previous_keys[%d]: %w", i, err)
		}
		k, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		if k.id == kr.current.id {
			return nil, fmt.Errorf("credentials.previous_keys[%d]: it is the current key", i)
		}
		kr.previous = append(kr.previous, k)
	}
	return kr, nil
}

// ad is the associated data a record is sealed with: what it is and whose,
// so a record copied under another principal, another name or another kind
// does not open.
func ad(kind, principal, name string) []byte {
	b := make([]byte, 0, 32+len(kind)+len(principal)+len(name))
	b = append(b, "toold credential\x00"...)
	b = append(b, kind...)
	b = append(b, 0)
	b = append(b, principal...)
	b = append(b, 0)
	return append(b, name...)
}

// Seal encrypts plain for (kind, principal, name) with the current key.
func (kr *Keyring) Seal(kind, principal, name string, plain []byte) []byte {
	out := make([]byte, 0, len(magic)+keyIDSize+nonceSize+len(plain)+kr.current.aead.Overhead())
	out = append(out, magic...)
	out = append(out, kr.current.id[:]...)
	nonce := make([]byte, nonceSize)
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	return kr.current.aead.Seal(out, nonce, plain, ad(kind, principal, name))
}

// ErrSealed is a record no key of the keyring opens for the (kind,
// principal, name) asked: another key sealed it (credentials.key changed
// without previous_keys), it belongs to another principal or name, or it
// was tampered with.
var ErrSealed = errors.New("credentials: the record does not open with this key for this principal and name")

// Open decrypts a record sealed for (kind, principal, name); stale says a
// previous key opened it (seal it again with the current one).
func (kr *Keyring) Open(kind, principal, name string, sealed []byte) (plain []byte, stale bool, err error) {
	head := len(magic) + keyIDSize + nonceSize
	if len(sealed) < head+kr.current.aead.Overhead() || string(sealed[:len(magic)]) != magic {
		return nil, false, ErrSealed
	}
	id, nonce, body := sealed[len(magic):len(magic)+keyIDSize], sealed[len(magic)+keyIDSize:head], sealed[head:]
	for i, k := range append([]key{kr.current}, kr.previous...) {
		if subtle.ConstantTimeCompare(id, k.id[:]) != 1 {
			continue
		}
		plain, err := k.aead.Open(nil, nonce, body, ad(kind, principal, name))
		if err != nil {
			return nil, false, ErrSealed
		}
		return plain, i > 0, nil
	}
	return nil, false, ErrSealed
}

// Derive is a key for another use, derived from the current key and a
// label (HMAC-SHA256): the same on every replica that shares the key.
func (kr *Keyring) Derive(label string) []byte {
	h := hmac.New(sha256.New, kr.raw)
	h.Write([]byte("toold credentials derive\x00" + label))
	return h.Sum(nil)
}
