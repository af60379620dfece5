package events

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The audit log is signed with ed25519 rather than keyed with an HMAC: the
// replicas hold the private key, and anyone given the public key (an
// auditor, a compliance job, another team) can check the log without being
// able to forge a record. With an HMAC every verifier would hold the key
// that writes the log. One signature per append covers every record before
// it through the hash chain, so signing costs one ed25519 operation per
// flush, not one per record.

// sigDomain separates the audit signature from any other use of the key,
// and the formats' signatures from each other.
func sigDomain(version int) string {
	if version >= 2 {
		return "toold audit v2\x00"
	}
	return "toold audit v1\x00"
}

// Signer signs the audit chain.
type Signer struct {
	priv ed25519.PrivateKey
	kid  string
}

// NewSigner wraps a private key.
func NewSigner(priv ed25519.PrivateKey) *Signer {
	return &Signer{priv: priv, kid: KeyID(priv.Public().(ed25519.PublicKey))}
}

// GenerateSigner makes a new random key.
func GenerateSigner() *Signer {
	_, priv, _ := ed25519.GenerateKey(rand.Reader) // never fails since Go 1.24
	return NewSigner(priv)
}

// PublicKey is the key that checks this signer's records.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// KeyID names the key in the records it signs.
func (s *Signer) KeyID() string { return s.kid }

// sign signs a record's (format 1) or block's (format 2) hash and the
// first record its signature vouches for.
func (s *Signer) sign(hash [sha256.Size]byte, from uint64, version int) string {
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.priv, sigMessage(hash, from, version)))
}

func sigMessage(hash [sha256.Size]byte, from uint64, version int) []byte {
	msg := append([]byte(sigDomain(version)), hash[:]...)
	return binary.BigEndian.AppendUint64(msg, from)
}

// KeyID is a public key's name in records: the first 8 bytes of its
// SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// MarshalPrivateKey is the key as a PKCS #8 PEM block (what `openssl
// genpkey -algorithm ed25519` writes).
func (s *Signer) MarshalPrivateKey() []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(s.priv) // ed25519 always marshals
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// MarshalPublicKey is the public key as text: "ed25519:" and its hex.
func MarshalPublicKey(pub ed25519.PublicKey) string { return "ed25519:" + hex.EncodeToString(pub) }

// ParseSigningKey reads a private key: a PKCS #8 PEM block, or the 32-byte
// seed as 64 hex digits (`openssl rand -hex 32`).
func ParseSigningKey(data []byte) (*Signer, error) {
	text := bytes.TrimSpace(data)
	if block, _ := pem.Decode(text); block != nil {
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the PEM block is not a PKCS #8 private key: %v", err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("the key is a %T, not ed25519 (openssl genpkey -algorithm ed25519)", k)
		}
		return NewSigner(priv), nil
	}
	seed, err := hex.DecodeString(string(text))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("not an ed25519 private key: give a PKCS #8 PEM file or 64 hex digits (openssl rand -hex 32)")
	}
	return NewSigner(ed25519.NewKeyFromSeed(seed)), nil
}

// ParsePublicKey reads a public key: "ed25519:" and 64 hex digits, or a
// PKIX PEM block (`openssl pkey -pubout`).
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	text := bytes.TrimSpace(data)
	if block, _ := pem.Decode(text); block != nil {
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the PEM block is not a public key: %v", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("the key is a %T, not ed25519", k)
		}
		return pub, nil
	}
	h, ok := strings.CutPrefix(string(text), "ed25519:")
	raw, err := hex.DecodeString(h)
	if !ok || err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New(`not an ed25519 public key: give "ed25519:" and 64 hex digits, or a PEM file`)
	}
	return ed25519.PublicKey(raw), nil
}

// LoadPublicKey reads a public key given inline ("ed25519:...") or as the
// path of a file holding one.
func LoadPublicKey(s string) (ed25519.PublicKey, error) {
	if strings.HasPrefix(s, "ed25519:") {
		return ParsePublicKey([]byte(s))
	}
	data, err := os.ReadFile(s)
	if err != nil {
		return nil, err
	}
	pub, err := ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	return pub, nil
}

// Keyring holds the public keys whose signatures verify trusts, by key id.
// A key rotated out stays here as long as records it signed are kept.
type Keyring struct {
	keys map[string]ed25519.PublicKey
}

// NewKeyring trusts the given keys.
func NewKeyring(pubs ...ed25519.PublicKey) *Keyring {
	k := &Keyring{keys: map[string]ed25519.PublicKey{}}
	for _, p := range pubs {
		k.Add(p)
	}
	return k
}

// Add trusts one more key.
func (k *Keyring) Add(pub ed25519.PublicKey) { k.keys[KeyID(pub)] = pub }

// Errors of a signature check.
var (
	errUnknownKey = errors.New("is signed by a key verify was not given (pass its public key with -public-key, or list it in state.audit.trusted_keys)")
	errBadSig     = errors.New("has a signature that does not match it: the record, or one before it, was altered")
)

// check verifies a signed record's signature.
func (k *Keyring) check(rec *Record) error {
	var pub ed25519.PublicKey
	if k != nil {
		pub = k.keys[rec.KeyID]
	}
	if pub == nil {
		return errUnknownKey
	}
	sig, err := base64.RawURLEncoding.DecodeString(rec.Sig)
	var hash [sha256.Size]byte
	if h, herr := hex.DecodeString(rec.Hash); herr == nil && len(h) == sha256.Size {
		copy(hash[:], h)
	} else {
		return errBadSig
	}
	if err != nil || !ed25519.Verify(pub, sigMessage(hash, rec.SignedFrom, rec.V), sig) {
		return errBadSig
	}
	return nil
}
