package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
)

// sealer encrypts and authenticates what a cookie holds (AES-256-GCM): a
// browser keeps it, toold alone can read or make one. The cookie's name is
// the additional data, so a value sealed for one cookie is refused as
// another.
type sealer struct{ aead cipher.AEAD }

// newSealer keys a sealer with a secret (so replicas that share it read
// each other's cookies), or with a random key when there is none.
func newSealer(secret string) (*sealer, error) {
	var key [32]byte
	if secret != "" {
		key = sha256.Sum256([]byte("toold console session\x00" + secret))
	} else {
		_, _ = rand.Read(key[:]) // never fails since Go 1.24
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// seal encodes v as JSON and seals it for the cookie name.
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// errUnsealed is a cookie toold did not seal (or sealed for another name,
// or with another key).
var errUnsealed = errors.New("the cookie was not sealed by this toold")

// open reads what seal made into v.
func (s *sealer) open(name, value string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return errUnsealed
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return errUnsealed
	}
	if json.Unmarshal(plain, v) != nil {
		return errUnsealed
	}
	return nil
}
