package events_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/toold/toold/internal/events"
)

// TestKeyFormats: a signing key reads from PKCS #8 PEM (what keygen and
// openssl write) and from a hex seed; a public key from "ed25519:<hex>"
// and PKIX PEM; other keys and text are refused.
func TestKeyFormats(t *testing.T) {
	s := events.GenerateSigner()
	pubDER, _ := x509.MarshalPKIXPublicKey(s.PublicKey())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	seed := strings.Repeat("ab", 32)
	fromSeed := events.NewSigner(ed25519.NewKeyFromSeed(mustHex(seed)))
	for _, tt := range []struct {
		name string
		in   string
		want string // key id, or "" for an error
	}{
		{"pem", string(s.MarshalPrivateKey()), s.KeyID()},
		{"hex seed", seed + "\n", fromSeed.KeyID()},
		{"short hex", seed[:62], ""},
		{"a public key", events.MarshalPublicKey(s.PublicKey()), ""},
		{"text", "replace-me", ""},
	} {
		got, err := events.ParseSigningKey([]byte(tt.in))
		if (tt.want == "") != (err != nil) || err == nil && got.KeyID() != tt.want {
			t.Errorf("signing key %s: %v %v", tt.name, got, err)
		}
	}
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"text form", events.MarshalPublicKey(s.PublicKey()), true},
		{"pem", string(pubPEM), true},
		{"no prefix", hex.EncodeToString(s.PublicKey()), false},
		{"a private key", string(s.MarshalPrivateKey()), false},
	} {
		pub, err := events.ParsePublicKey([]byte(tt.in))
		if tt.ok != (err == nil) || err == nil && events.KeyID(pub) != s.KeyID() {
			t.Errorf("public key %s: %v", tt.name, err)
		}
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
