package state_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// TestListeningStoreRefusesAnonymousClients is finding 6 of issue 16: with
// state.nats.listen set, a local process that connected with CONNECT {}
// could read stored call arguments and purge the audit stream. A
// listening store now always requires credentials: the anonymous client
// is refused, a replica with the credentials works, and a store asked to
// listen without any refuses to start.
func TestListeningStoreRefusesAnonymousClients(t *testing.T) {
	const token = "a-token-of-thirty-two-characters-or-more"
	up, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", Name: "server", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	if got := statetest.AnonymousConnect(t, up.ClientURL()); !strings.Contains(got, "Authorization Violation") {
		t.Errorf("an anonymous client on the listening store got %q, want an authorization violation", got)
	}
	replica, err := state.Open(context.Background(), state.Options{URL: up.ClientURL(), Name: "replica", Token: token})
	if err != nil {
		t.Fatalf("a replica with the token: %v", err)
	}
	defer replica.Close()
	if _, err := replica.Executions.Put(context.Background(), "k", []byte("v")); err != nil {
		t.Errorf("the replica with the token cannot write: %v", err)
	}
	wrong, err := state.Open(context.Background(), state.Options{URL: up.ClientURL(), Name: "intruder", Token: "not-the-token-" + token,
		ConnectTimeout: 2 * time.Second})
	if err == nil {
		wrong.Close()
		t.Error("a client with a wrong token connected")
	}

	open, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", Name: "open"})
	if err == nil {
		open.Close()
		t.Fatal("a store listening without credentials started")
	}
	if !strings.Contains(err.Error(), "state.nats.listen") || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("the refusal does not say what to set: %v", err)
	}
}

// TestListeningStoreCredentials: each kind of credential a listening store
// takes lets a replica that holds it in, and the anonymous client out; a
// listener that would carry them over the network in clear, or a secret
// short enough to guess, is refused.
func TestListeningStoreCredentials(t *testing.T) {
	dir := t.TempDir()
	seed := writeNKeySeed(t, dir)
	pki := newPKI(t, dir)
	tests := []struct {
		name                     string
		server, client, intruder state.Options
	}{
		{"user and password", state.Options{User: "toold", Password: statetest.Token()}, state.Options{},
			state.Options{User: "toold", Password: statetest.Token()}},
		{"nkey", state.Options{NKeySeedFile: seed}, state.Options{}, state.Options{NKeySeedFile: writeNKeySeed(t, t.TempDir())}},
		{"tls client certificates", state.Options{TLS: state.TLS{CAFile: pki.ca, CertFile: pki.serverCert, KeyFile: pki.serverKey}},
			state.Options{TLS: state.TLS{CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey}},
			state.Options{TLS: state.TLS{CAFile: pki.ca}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			so := tt.server
			so.Dir, so.Listen, so.Name = t.TempDir(), "127.0.0.1:0", "server"
			up, err := state.Open(context.Background(), so)
			if err != nil {
				t.Fatal(err)
			}
			defer up.Close()
			if got := statetest.AnonymousConnect(t, up.ClientURL()); got == "PONG" || got == "+OK" {
				t.Errorf("an anonymous client got in: %q", got)
			}
			co := tt.client
			if co.TLS == (state.TLS{}) {
				co = so
				co.Dir, co.Listen = "", ""
			}
			co.URL, co.Name = up.ClientURL(), "replica"
			replica, err := state.Open(context.Background(), co)
			if err != nil {
				t.Fatalf("a replica with the credentials: %v", err)
			}
			replica.Close()
			in := tt.intruder
			in.URL, in.Name, in.ConnectTimeout = up.ClientURL(), "intruder", 2*time.Second
			if st, err := state.Open(context.Background(), in); err == nil {
				st.Close()
				t.Error("a client with other credentials got in")
			}
		})
	}
	for name, o := range map[string]state.Options{
		"short token":            {Listen: "127.0.0.1:0", Token: "short"},
		"non-loopback, no tls":   {Listen: "0.0.0.0:0", Token: statetest.Token()},
		"a ca without a cert":    {Listen: "127.0.0.1:0", TLS: state.TLS{CAFile: pki.ca}},
		"a seed file of nothing": {Listen: "127.0.0.1:0", NKeySeedFile: pki.ca},
	} {
		o.Dir = t.TempDir()
		if st, err := state.Open(context.Background(), o); err == nil {
			st.Close()
			t.Errorf("%s: the store listened", name)
		}
	}
}

func writeNKeySeed(t *testing.T, dir string) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	f := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(f, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// pki is a CA and the server and client certificates it signed, as files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &pki{ca: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", keyDER)
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
