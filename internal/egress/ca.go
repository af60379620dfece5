package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"
)

// authority is a run's own certificate authority: made in memory when the
// run starts, its key never written anywhere, gone with the run. It signs
// a certificate for each host whose requests get a header, and only for
// those (its name constraints say so to every client that checks them).
// The run trusts it through the bundle; nothing else does.
type authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey // one key for every host's certificate

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// authorityLife is how long a run's certificates are valid: a run of a
// command ends long before; an MCP server that lives longer is restarted
// by its operator before then.
const authorityLife = 397 * 24 * time.Hour

// newAuthority makes a run's authority for the hosts of rules (names,
// "*.suffix" as the domain, addresses).
func newAuthority(hosts []rule) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "toold egress proxy, one run", Organization: []string{"toold"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(authorityLife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	for _, h := range hosts {
		switch {
		case h.addr.IsValid():
			tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: h.addr.AsSlice(),
				Mask: net.CIDRMask(h.addr.BitLen(), h.addr.BitLen())})
		default:
			tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, h.name)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("the run's certificate authority: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, leafKey: leafKey, leaves: map[string]*tls.Certificate{},
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// leaf returns the certificate the proxy presents for t's host, made on
// first use.
func (a *authority) leaf(t target) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[t.host]; ok {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: t.host},
		NotBefore:    a.cert.NotBefore,
		NotAfter:     a.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if t.addr.IsValid() {
		tmpl.IPAddresses = []net.IP{t.addr.AsSlice()}
	} else {
		tmpl.DNSNames = []string{t.host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: a.leafKey}
	a.leaves[t.host] = c
	return c, nil
}

// systemBundle is the system's root certificates as one PEM file, read
// where Go's own loader looks (SSL_CERT_FILE first), or nil.
func systemBundle() []byte {
	files := []string{os.Getenv("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/pki/tls/cacert.pem",
		"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem"}
	for _, f := range files {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			return b
		}
	}
	return nil
}
