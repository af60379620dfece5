// Package netguard is toold's one way out: every outbound connection toold
// makes — HTTP tools, upstream MCP servers over HTTP, model APIs — dials
// through a Guard, so a URL a model influenced, an upstream's redirect or a
// name whose DNS answer changed cannot reach what sits next to toold: its
// own loopback, the private network, link-local and cloud metadata
// addresses.
//
// A Guard refuses, unless its Policy allows the host:
//
//   - addresses that are not global unicast: loopback, private, link-local,
//     CGNAT, multicast, unspecified, documentation and other
//     special-purpose ranges (the IANA registries, through
//     code.dny.dev/ssrf), and their IPv4-mapped, IPv4-compatible, 6to4 and
//     NAT64 forms;
//   - cloud metadata addresses (169.254.169.254, fd00:ec2::254, ...) even
//     inside an allowed prefix: only the exact address allows one;
//   - names that mean this host or a metadata service (localhost and its
//     subdomains, metadata.google.internal, ...), and IPv4 addresses in
//     decimal, octal or hex forms, which resolvers read differently;
//   - schemes other than https (http only where the policy allows it), and
//     credentials in URLs.
//
// Addresses are checked at dial time, on the address the socket connects
// to (net.Dialer.Control), after toold resolved the name itself: what was
// checked is what is dialed, so a DNS answer that changes between two
// lookups (rebinding) cannot pass. A name whose answer holds any refused
// address is refused whole. Redirects are checked like the first request
// and bounded. Proxy environment variables are never read: a proxy is used
// only when the policy names one.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"code.dny.dev/ssrf"
)

// Policy says what a Guard lets through besides the public internet.
type Policy struct {
	// Allow lists what may be reached although it is internal: host names
	// ("vault.internal"; exact, case-insensitive, a trailing dot ignored),
	// which may then resolve to any address but a metadata one; and IP
	// addresses or CIDR prefixes ("127.0.0.1", "10.20.0.0/16", "fd00::/8").
	Allow []string
	// AllowHTTP permits plain http:// URLs; by default only https is.
	AllowHTTP bool
	// Proxy is an http:// or https:// proxy every request goes through;
	// empty means none. HTTP_PROXY, HTTPS_PROXY and NO_PROXY are never
	// read. The proxy itself is allowed; targets are still checked, but the
	// proxy resolves names again, so rebinding between the two lookups is
	// the proxy's to refuse.
	Proxy string
	// Resolver looks names up (default net.DefaultResolver).
	Resolver *net.Resolver
}

// maxRedirects bounds the redirects a Client follows.
const maxRedirects = 5

// dialTimeout bounds one connection attempt; the caller's context bounds
// the whole request.
const dialTimeout = 10 * time.Second

// ErrRefused is wrapped by every refusal: errors.Is(err, ErrRefused) tells a
// guarded refusal from a network failure, through *url.Error and
// *net.OpError alike.
var ErrRefused = errors.New("refused by toold's outbound guard")

// RefusedError says what was refused and why.
type RefusedError struct {
	// Target is what was asked for: a URL, a host or host:port.
	Target string
	// Addr is the resolved address refused, when there was one.
	Addr string
	// Reason is a sentence an operator can act on.
	Reason string
}

func (e *RefusedError) Error() string {
	s := "outbound request to " + e.Target
	if e.Addr != "" && e.Addr != e.Target {
		s += " (" + e.Addr + ")"
	}
	return s + " refused: " + e.Reason
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

func refused(target, addr, format string, args ...any) *RefusedError {
	return &RefusedError{Target: target, Addr: addr, Reason: fmt.Sprintf(format, args...)}
}

// Guard applies a Policy to outbound connections; safe for concurrent use.
type Guard struct {
	allowNames    map[string]bool
	allowPrefixes []netip.Prefix
	allowHTTP     bool
	proxy         *url.URL
	resolver      *net.Resolver
	classes       *ssrf.Guardian
	// firewall, set by tests only, sees every address the guard let
	// through, just before the socket connects; an error stops it.
	firewall func(netip.AddrPort) error
}

// New checks p and builds its Guard.
func New(p Policy) (*Guard, error) {
	g := &Guard{allowNames: map[string]bool{}, allowHTTP: p.AllowHTTP, resolver: p.Resolver}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	var errs []error
	for _, a := range p.Allow {
		if err := g.allow(a); err != nil {
			errs = append(errs, err)
		}
	}
	if p.Proxy != "" {
		if err := g.setProxy(p.Proxy); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v4, v6 := splitFamilies(g.allowPrefixes)
	g.classes = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork(),
		ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))
	return g, nil
}

// allow adds one Allow entry: an address, a prefix or a host name.
func (g *Guard) allow(entry string) error {
	s := strings.TrimSpace(entry)
	if p, err := netip.ParsePrefix(s); err == nil {
		g.allowPrefixes = append(g.allowPrefixes, p.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		a = a.Unmap().WithZone("")
		g.allowPrefixes = append(g.allowPrefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	name, err := HostName(s)
	if err != nil {
		return fmt.Errorf("allow %q: not an IP address, a CIDR prefix or a host name: %v", entry, err)
	}
	g.allowNames[name] = true
	return nil
}

func (g *Guard) setProxy(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("proxy %q: give an http:// or https:// URL with a host", raw)
	}
	g.proxy = u
	return g.allow(u.Hostname())
}

func splitFamilies(ps []netip.Prefix) (v4, v6 []netip.Prefix) {
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6
}

// roundTripper returns a transport that checks every request's URL (scheme,
// credentials, host) and dials through the guard. It keeps up to 16 idle
// connections per host, tries HTTP/2 over TLS, and refuses response
// headers over 64 KiB. Each call makes a new transport with its own
// connection pool.
func (g *Guard) roundTripper() http.RoundTripper {
	t := &http.Transport{
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if g.proxy != nil {
		t.Proxy = http.ProxyURL(g.proxy)
	}
	return &roundTripper{g: g, t: t}
}

// Client returns an HTTP client that checks every request and redirect
// and follows at most five redirects. It sets no timeout: each request's
// context bounds it. Each call makes a new transport with its own
// connection pool: make one client and keep it.
func (g *Guard) Client() *http.Client {
	return &http.Client{Transport: g.roundTripper(), CheckRedirect: g.CheckRedirect}
}

// CheckRedirect is an http.Client's CheckRedirect: each hop's URL passes
// CheckURL, and at most five redirects are followed.
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return refused(req.URL.Redacted(), "", "more than %d redirects", maxRedirects)
	}
	if err := g.checkURL(req.URL); err != nil {
		err.Reason = "redirect from " + via[len(via)-1].URL.Redacted() + ": " + err.Reason
		return err
	}
	return nil
}

type roundTripper struct {
	g *Guard
	t *http.Transport
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	err := rt.g.CheckURL(req.URL)
	if err == nil && rt.g.proxy != nil {
		// The proxy dials the target, not us: check its addresses here.
		_, err = rt.g.resolve(req.Context(), req.URL.Hostname())
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return rt.t.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (rt *roundTripper) CloseIdleConnections() { rt.t.CloseIdleConnections() }
