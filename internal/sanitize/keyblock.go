package sanitize

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"math/big"
	"strings"
)

// Whether a private key block is a key: what an approver's view redacts
// (see review.go). The matcher redacts anything framed as a key block,
// which is right for outputs and logs — a truncated or odd key is still a
// key — but a person deciding on a call must not be shown
// "[REDACTED:private_key]" where a shell script sits between a BEGIN and
// an END line. So there a block counts as a key only when it is one,
// exactly: a PEM block that decodes, in lines of one width (as encoders
// write them: a line of another width is something else inserted), whose
// bytes parse as a key and, parsed keys being re-encoded, are that key's
// canonical encoding — no byte in it that the key does not account for.
// Kinds toold cannot check this way (encrypted keys, OpenPGP) are not
// vouched for, and are shown to the approver.

// keyBlock reports whether block, from its "-----BEGIN" on, is a private
// key that toold can check is one.
func keyBlock(block string) bool {
	block = strings.NewReplacer(`\r\n`, "\n", `\n`, "\n", "\r\n", "\n").Replace(block)
	p, rest := pem.Decode([]byte(block))
	if p == nil || strings.TrimSpace(string(rest)) != "" || len(p.Headers) > 0 || !evenLines(block) {
		return false
	}
	switch p.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(p.Bytes)
		if err != nil {
			return false
		}
		again, err := x509.MarshalPKCS8PrivateKey(k)
		return err == nil && bytes.Equal(again, p.Bytes)
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(p.Bytes)
		return err == nil && bytes.Equal(x509.MarshalPKCS1PrivateKey(k), p.Bytes)
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(p.Bytes)
		if err != nil {
			return false
		}
		again, err := x509.MarshalECPrivateKey(k)
		return err == nil && bytes.Equal(again, p.Bytes)
	case "OPENSSH PRIVATE KEY":
		return opensshKey(p.Bytes)
	}
	return false
}

// evenLines reports whether the body lines of a PEM block (between its
// BEGIN and END lines) all have one width, but the last, which may be
// shorter.
func evenLines(block string) bool {
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) < 3 {
		return false
	}
	body := lines[1 : len(lines)-1]
	width := len(strings.TrimRight(body[0], "\r"))
	for i, l := range body {
		n := len(strings.TrimRight(l, "\r"))
		if n == 0 || n > width || n < width && i != len(body)-1 {
			return false
		}
	}
	return true
}

// opensshKey checks an unencrypted openssh-key-v1 structure
// (PROTOCOL.key): magic, cipher and kdf "none", one key, its public blob
// equal to the public half in the private section, the two check integers
// equal, a printable comment, and the padding 1, 2, 3… to the end.
func opensshKey(b []byte) bool {
	const magic = "openssh-key-v1\x00"
	if !bytes.HasPrefix(b, []byte(magic)) {
		return false
	}
	r := sshReader{b: b[len(magic):]}
	cipher, kdf, _ := r.str(), r.str(), r.str()
	n := r.u32()
	pub := r.str()
	priv := r.str()
	if !r.ok() || len(r.b) != 0 || string(cipher) != "none" || string(kdf) != "none" || n != 1 {
		return false
	}
	p := sshReader{b: priv}
	c1, c2 := p.u32(), p.u32()
	keyType := p.str()
	if !p.ok() || c1 != c2 {
		return false
	}
	// The key's fields depend on its type; each is checked against its
	// public half, so none can carry anything but the key.
	var fields [][]byte
	for range fieldCount[string(keyType)] {
		fields = append(fields, p.str())
	}
	if !p.ok() || len(fields) == 0 || !sshKeyHolds(string(keyType), pub, fields) {
		return false
	}
	comment := p.str()
	for _, c := range comment {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	for i, c := range p.b {
		if int(c) != i+1 {
			return false
		}
	}
	return p.ok() && len(p.b) < 8
}

// fieldCount is the number of fields of each key type toold checks in an
// OpenSSH private section, after the type.
var fieldCount = map[string]int{
	"ssh-ed25519":         2, // public key; seed and public key
	"ssh-rsa":             6, // n, e, d, iqmp, p, q
	"ecdsa-sha2-nistp256": 3, // curve, public point, private scalar
	"ecdsa-sha2-nistp384": 3,
	"ecdsa-sha2-nistp521": 3,
}

// sshKeyHolds reports whether the private fields of a key are that key:
// they derive its public key, which is the public blob's.
func sshKeyHolds(keyType string, pub []byte, f [][]byte) bool {
	b := sshReader{b: pub}
	if string(b.str()) != keyType {
		return false
	}
	switch keyType {
	case "ssh-ed25519":
		if len(f[1]) != ed25519.PrivateKeySize {
			return false
		}
		derived := ed25519.NewKeyFromSeed(f[1][:ed25519.SeedSize])
		return bytes.Equal(derived, f[1]) && bytes.Equal(f[0], derived[ed25519.SeedSize:]) &&
			bytes.Equal(b.str(), f[0]) && b.ok() && len(b.b) == 0
	case "ssh-rsa":
		e, n := b.str(), b.str()
		if !b.ok() || len(b.b) != 0 || !bytes.Equal(e, f[1]) || !bytes.Equal(n, f[0]) || len(e) > 4 || !canonicalMPInts(f...) {
			return false
		}
		k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())},
			D: new(big.Int).SetBytes(f[2]), Primes: []*big.Int{new(big.Int).SetBytes(f[4]), new(big.Int).SetBytes(f[5])}}
		return k.Validate() == nil
	default: // ecdsa-sha2-*
		curve, point := b.str(), b.str()
		if !b.ok() || len(b.b) != 0 || !bytes.Equal(curve, f[0]) || !bytes.Equal(point, f[1]) || !canonicalMPInts(f[2]) {
			return false
		}
		c := map[string]ecdh.Curve{"nistp256": ecdh.P256(), "nistp384": ecdh.P384(), "nistp521": ecdh.P521()}[string(curve)]
		if c == nil || len(point) < 3 {
			return false
		}
		size := (len(point) - 1) / 2
		d := new(big.Int).SetBytes(f[2])
		if d.BitLen() > 8*size {
			return false
		}
		k, err := c.NewPrivateKey(d.FillBytes(make([]byte, size)))
		return err == nil && bytes.Equal(k.PublicKey().Bytes(), point)
	}
}

// canonicalMPInts reports whether each is an SSH mpint in its shortest
// form: no leading zero byte but one that keeps a high bit positive.
func canonicalMPInts(vs ...[]byte) bool {
	for _, v := range vs {
		if len(v) > 1 && v[0] == 0 && v[1]&0x80 == 0 {
			return false
		}
	}
	return true
}

// sshReader reads the SSH wire format's uint32 and length-prefixed
// strings; bad turns true at the first one that does not fit.
type sshReader struct {
	b   []byte
	bad bool
}

func (r *sshReader) ok() bool { return !r.bad }

func (r *sshReader) u32() uint32 {
	if len(r.b) < 4 {
		r.b, r.bad = nil, true
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *sshReader) str() []byte {
	n := r.u32()
	if r.bad || uint64(n) > uint64(len(r.b)) {
		r.b, r.bad = nil, true
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}
