package netguard

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// counter is a loopback listener that counts the connections it accepts:
// a refused request must leave it at zero.
type counter struct {
	port string
	n    atomic.Int64
}

func listenCounter(t *testing.T) *counter {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	_, c.port, _ = net.SplitHostPort(ln.Addr().String())
	lns := []net.Listener{ln}
	if ln6, err := net.Listen("tcp6", "[::1]:"+c.port); err == nil { // where the host has IPv6
		lns = append(lns, ln6)
	}
	for _, l := range lns {
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				c.n.Add(1)
				conn.Close()
			}
		}()
		t.Cleanup(func() { l.Close() })
	}
	return c
}

// dnsServer is a resolver the test controls: a UDP DNS server on loopback
// answering from a script. Each A (or AAAA) query for a name takes the next
// answer of its list; the last one repeats. Unknown names are NXDOMAIN.
type dnsServer struct {
	addr    string
	mu      sync.Mutex
	script  map[string][][]netip.Addr
	asked   map[dnsmessage.Type]map[string]int
	queries atomic.Int64
}

func startDNS(t *testing.T, script map[string][]string) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &dnsServer{addr: pc.LocalAddr().String(), script: map[string][][]netip.Addr{},
		asked: map[dnsmessage.Type]map[string]int{dnsmessage.TypeA: {}, dnsmessage.TypeAAAA: {}}}
	for name, answers := range script {
		for _, a := range answers {
			var set []netip.Addr
			for _, ip := range strings.Split(a, ",") {
				set = append(set, netip.MustParseAddr(ip))
			}
			s.script[strings.ToLower(name)+"."] = append(s.script[strings.ToLower(name)+"."], set)
		}
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := s.answer(buf[:n]); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	return s
}

// resolver sends every query to the server, whatever resolv.conf says.
func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", s.addr)
	}}
}

func (s *dnsServer) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	s.queries.Add(1)
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	answers, known := s.script[name]
	var set []netip.Addr
	if known && (q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeAAAA) {
		i := min(s.asked[q.Type][name], len(answers)-1)
		s.asked[q.Type][name]++
		set = answers[i]
	}
	s.mu.Unlock()
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	for _, a := range set {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}

// firewall stands behind the guard in tests: every address the guard let
// through is recorded, and anything outside loopback is stopped before
// connect(2), so no test sends a packet off the machine.
type firewall struct {
	mu     sync.Mutex
	passed []netip.AddrPort
}

func (f *firewall) check(ap netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.passed = append(f.passed, ap)
	if !ap.Addr().Unmap().IsLoopback() {
		return &net.AddrError{Err: "the test firewall stops connections off loopback", Addr: ap.String()}
	}
	return nil
}

func (f *firewall) offLoopback() []netip.AddrPort {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netip.AddrPort
	for _, ap := range f.passed {
		if !ap.Addr().Unmap().IsLoopback() {
			out = append(out, ap)
		}
	}
	return out
}

func newGuard(t *testing.T, p Policy, fw *firewall) *Guard {
	t.Helper()
	g, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	g.firewall = fw.check
	return g
}

// testClient is g's Client bounded in time, so a test that goes wrong
// fails rather than hangs.
func testClient(g *Guard) *http.Client {
	c := g.Client()
	c.Timeout = 5 * time.Second
	return c
}
