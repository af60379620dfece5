package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// CheckURL refuses, without any network traffic, a URL the guard would
// never fetch: another scheme than https (or http where allowed),
// credentials in it, a host that is malformed, names this host or a
// metadata service, writes an IPv4 address in a non-standard form, or is a
// refused address literal. Names are checked again, resolved, at dial time.
func (g *Guard) CheckURL(u *url.URL) error {
	if err := g.checkURL(u); err != nil {
		return err
	}
	return nil
}

func (g *Guard) checkURL(u *url.URL) *RefusedError {
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.allowHTTP:
	case u.Scheme == "http":
		return refused(u.Redacted(), "", "plain http is not allowed; use https, or allow http for this destination")
	default:
		return refused(u.Redacted(), "", "scheme %q is not allowed (https only)", u.Scheme)
	}
	if u.User != nil {
		return refused(u.Redacted(), "", "credentials in the URL are refused; send them in a header")
	}
	if u.Opaque != "" || u.Host == "" {
		return refused(u.Redacted(), "", "the URL has no host")
	}
	target := u.Redacted()
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return refused(target, "", "port %q is not a number from 1 to 65535", p)
		}
	}
	return g.checkHost(target, u.Hostname())
}

// checkHost applies the static rules to a host (a name or an address
// literal, without brackets or port).
func (g *Guard) checkHost(target, host string) *RefusedError {
	if host == "" {
		return refused(target, "", "no host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return refused(target, "", "addresses with a zone (%%%s) are refused", ip.Zone())
		}
		return g.checkAddr(target, "", ip)
	}
	name, err := HostName(host)
	if err != nil {
		return refused(target, "", "%v", err)
	}
	if NumericHost(name) {
		return refused(target, "", "%q reads as an IPv4 address in a decimal, octal or hex form, which resolvers "+
			"read differently; write the address dotted-decimal", host)
	}
	if g.allowNames[name] {
		return nil
	}
	if reservedName(name) {
		return refused(target, "", "%q names this host or a cloud metadata service", host)
	}
	return nil
}

// checkAddr decides for one address; name is the host name it was resolved
// from, or "" for a literal.
func (g *Guard) checkAddr(target, name string, ip netip.Addr) *RefusedError {
	ip = ip.WithZone("").Unmap()
	if metadataAddrs[ip] {
		if g.allowsExactly(ip) {
			return nil
		}
		return refused(target, ip.String(), "%s is a cloud metadata address; only an allow-list entry naming "+
			"exactly this address admits it", ip)
	}
	if name != "" && g.allowNames[name] {
		return nil
	}
	if err := g.classes.SafeAddr(ip); err != nil {
		return refused(target, ip.String(), "%s is not a public address (%s); add it or the host's name to the allow-list "+
			"if it is meant to be reached", ip, class(ip))
	}
	return nil
}

func (g *Guard) allowsExactly(ip netip.Addr) bool {
	for _, p := range g.allowPrefixes {
		if p.Bits() == ip.BitLen() && p.Addr() == ip {
			return true
		}
	}
	return false
}

// resolve checks host statically, looks it up, and checks every address of
// the answer: one refused address refuses the host whole.
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if err := g.checkHost(host, host); err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	name, _ := HostName(host)
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", strings.ToLower(host))
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if err := g.checkAddr(host, name, a); err != nil {
			return nil, err
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// DialContext connects to address (host:port) when the guard allows it: the
// host passes the static checks, every address it resolves to is allowed,
// and the address each socket connects to is checked again just before
// connect(2). Use it as an http.Transport's DialContext, or for any other
// outbound TCP connection.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, refused(address, "", "not a host:port address")
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			re.Target = address
		}
		return nil, err
	}
	name, _ := HostName(host)
	d := net.Dialer{Timeout: dialTimeout, Control: func(_, addr string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return refused(address, addr, "cannot read the address being dialed")
		}
		if err := g.checkAddr(address, name, ap.Addr()); err != nil {
			return err
		}
		if g.firewall != nil {
			return g.firewall(ap)
		}
		return nil
	}}
	var first error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil || errors.Is(err, ErrRefused) {
			break
		}
	}
	return nil, first
}

// HostName normalizes a DNS name: lower case, one trailing dot dropped,
// labels of letters, digits, '-' and '_' (IDNs in their xn-- form).
func HostName(host string) (string, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "" || len(name) > 253 {
		return "", fmt.Errorf("%q is not a host name", host)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%q has an empty or over-long label", host)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", fmt.Errorf("%q holds %q, which a host name cannot (write an IDN in its xn-- form)", host, r)
			}
		}
	}
	return name, nil
}

// NumericHost reports a name whose last label is a number (decimal, or hex
// after 0x): URL parsers and resolvers read such a host as an IPv4 address
// ("2130706433", "0x7f.1", "0177.0.0.1", "127.1"), each in its own way.
func NumericHost(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// reservedName: names that mean this host (RFC 6761) or a cloud provider's
// metadata service, whatever DNS says.
func reservedName(name string) bool {
	switch name {
	case "localhost", "metadata", "metadata.google.internal", "metadata.goog",
		"instance-data", "instance-data.ec2.internal":
		return true
	}
	return strings.HasSuffix(name, ".localhost")
}

// metadataAddrs are cloud instance metadata services: AWS, GCP and Azure
// (169.254.169.254, fd00:ec2::254), AWS ECS task metadata (169.254.170.2),
// Alibaba Cloud (100.100.100.200).
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true,
	netip.MustParseAddr("169.254.170.2"):   true,
	netip.MustParseAddr("100.100.100.200"): true,
	netip.MustParseAddr("fd00:ec2::254"):   true,
}

var (
	cgnat   = netip.MustParsePrefix("100.64.0.0/10")
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	v4compa = netip.MustParsePrefix("::/96")
)

// class names why an address is refused, for the message.
func class(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case cgnat.Contains(ip):
		return "shared (CGNAT)"
	case nat64.Contains(ip):
		return "NAT64"
	case sixTo4.Contains(ip):
		return "6to4"
	case v4compa.Contains(ip):
		return "IPv4-compatible IPv6"
	}
	return "special-purpose (not global unicast)"
}
