// Package egresstest holds what the egress tests of several packages
// (egress, launch, the tools that start programs) share: a certificate
// authority of the test's own, TLS servers on loopback that echo what
// reached them, and a resolver that answers the test's names.
package egresstest

import (
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// CA is a certificate authority of the test's own; File is its
// certificate as a PEM file (for ca_files) readable by every uid.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte
	File string
}

// NewCA makes a CA and writes its certificate to a file.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egresstest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	ca.File = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca.File, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool is a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Certificate is a server certificate for names (and 127.0.0.1).
func (ca *CA) Certificate(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Seen is one request a Server received.
type Seen struct {
	Method string      `json:"method"`
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
}

// Server is a TLS server on 127.0.0.1 answering every request with the
// request as JSON (method, host, path, headers): a server that echoes
// what it was sent, secrets included.
type Server struct {
	*httptest.Server
	Port int
	mu   sync.Mutex
	seen []Seen
	git  http.Handler // /repo.git/: git's smart HTTP, once Git was called
}

// Server starts one with a certificate for names, signed by the CA. A
// path of /gzip answers gzip-compressed when the client asks for it.
func (ca *CA) Server(t testing.TB, names ...string) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Certificate(t, names...)}}
	s.StartTLS()
	t.Cleanup(s.Close)
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	s.Port, _ = strconv.Atoi(p)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	seen := Seen{Method: r.Method, Host: r.Host, Path: r.URL.Path, Header: r.Header.Clone()}
	s.mu.Lock()
	s.seen = append(s.seen, seen)
	git := s.git
	s.mu.Unlock()
	if git != nil && strings.HasPrefix(r.URL.Path, "/repo.git/") {
		git.ServeHTTP(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	body, _ := json.Marshal(seen)
	// A header echoing one too: redaction covers headers.
	if v := r.Header.Get("Authorization"); v != "" {
		w.Header().Set("X-Echo-Authorization", v)
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/gzip" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(append(body, '\n'))
		_ = zw.Close()
		return
	}
	_, _ = w.Write(append(body, '\n'))
}

// Git serves a repository of one commit at /repo.git over git's smart
// HTTP (git http-backend, as CGI) and returns that commit's id.
func (s *Server) Git(t testing.TB) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("SKIPPED: git is not installed (apt-get install git): %v", err)
	}
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "repo.git")
	run := func(args ...string) string {
		cmd := exec.Command(git, args...)
		cmd.Env = []string{"HOME=" + dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@test", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@test", "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("egress\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-C", work, "add", "README")
	run("-C", work, "commit", "-q", "-m", "one")
	run("clone", "-q", "--bare", work, bare)
	s.mu.Lock()
	s.git = &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: dir,
		Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + dir}}
	s.mu.Unlock()
	return run("-C", work, "rev-parse", "HEAD")
}

// Seen is every request received so far.
func (s *Server) Seen() []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Seen(nil), s.seen...)
}

// Resolver answers names (name -> comma-separated addresses) from
// memory and knows no other name: Go's resolver, speaking DNS to a
// responder of the test's own. asked, when given, sees every name
// queried.
func Resolver(names map[string]string, asked ...func(name string)) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go answer(server, names, asked)
		return client, nil
	}}
}

// answer serves DNS over a stream (two-byte lengths) until the pipe ends.
func answer(c net.Conn, names map[string]string, asked []func(string)) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := reply(q, names, asked)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

func reply(query []byte, names map[string]string, asked []func(string)) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	for _, f := range asked {
		f(name)
	}
	addrs, known := names[name]
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET}
	if known {
		for a := range strings.SplitSeq(addrs, ",") {
			ip := netip.MustParseAddr(a)
			switch {
			case q.Type == dnsmessage.TypeA && ip.Is4():
				_ = b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
			case q.Type == dnsmessage.TypeAAAA && ip.Is6():
				_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
			}
		}
	}
	out, _ := b.Finish()
	return out
}
