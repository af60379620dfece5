package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/publicsuffix"

	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/netguard"
)

// Policy is the mapping form of a sandbox's `network:`: the hosts a run
// may reach through its egress proxy, the headers the proxy adds for it,
// and the bounds of its traffic. Zero values take the defaults below.
type Policy struct {
	// Allow lists the destinations: "api.github.com" (that name, ports 443
	// and 80), "*.npmjs.org" (any name below it, not the name itself),
	// "host:port" (that port only), and addresses, "127.0.0.1",
	// "127.0.0.1:8443", "[::1]:8443". A name that resolves to a private or
	// loopback address is refused unless that address is listed itself.
	Allow []string `yaml:"allow" validate:"dive,required"`
	// Inject adds or replaces a header on every HTTPS request to a host:
	// the proxy terminates TLS for it with the run's own certificate
	// authority, so the value never enters the sandbox.
	Inject []Inject `yaml:"inject" validate:"dive"`
	// CAFiles are PEM files of extra roots toold trusts for the real
	// servers (an internal CA); the run's bundle holds them too.
	CAFiles []string `yaml:"ca_files" validate:"dive,required"`
	// MaxConnections bounds the destinations one run opens, and the
	// connections it holds open to the proxy at once (default 256).
	MaxConnections int `yaml:"max_connections" validate:"gte=0,lte=1000000"`
	// MaxBytes bounds the bytes one run moves through the proxy, both
	// ways together (default 1 GiB).
	MaxBytes int64 `yaml:"max_bytes" validate:"gte=0"`
}

// Inject is one header the proxy sets on a host's HTTPS requests.
type Inject struct {
	// Host is a name, "*.suffix" or an address, covered by Allow.
	Host string `yaml:"host" validate:"required"`
	// Header is the header's name (Authorization, X-Api-Key, ...).
	Header string `yaml:"header" validate:"required"`
	// Value is its value: "Bearer ${GITHUB_TOKEN}" (expanded when the
	// configuration loads), or "${user:github}", the calling principal's
	// own credential, resolved per run through the credential interface.
	Value string `yaml:"value" validate:"required"`
}

// Defaults of a Policy's bounds.
const (
	DefaultMaxConnections = 256
	DefaultMaxBytes       = 1 << 30
)

// defaultPorts are the ports an entry without one allows.
var defaultPorts = []int{443, 80}

// rule is one parsed entry of Allow (or an Inject's host, without a port).
type rule struct {
	name   string     // lower case, no trailing dot; "" for an address
	suffix bool       // "*.name": any name below name
	addr   netip.Addr // an address entry
	port   int        // 0: the default ports
}

func (r rule) String() string {
	var h string
	switch {
	case r.addr.IsValid():
		h = r.addr.String()
		if r.port != 0 && r.addr.Is6() {
			h = "[" + h + "]"
		}
	case r.suffix:
		h = "*." + r.name
	default:
		h = r.name
	}
	if r.port != 0 {
		h += ":" + strconv.Itoa(r.port)
	}
	return h
}

// ports are the ports the rule allows.
func (r rule) ports() []int {
	if r.port != 0 {
		return []int{r.port}
	}
	return defaultPorts
}

// coversHost says whether the rule names t's host, whatever the port.
func (r rule) coversHost(t target) bool {
	switch {
	case r.addr.IsValid():
		return t.addr.IsValid() && t.addr == r.addr
	case t.addr.IsValid():
		return false
	case r.suffix:
		return strings.HasSuffix(t.host, "."+r.name)
	default:
		return t.host == r.name
	}
}

// allows says whether the rule admits t, its port included.
func (r rule) allows(t target) bool {
	return r.coversHost(t) && slices.Contains(r.ports(), t.port)
}

// parseRule reads one Allow entry; withPort false refuses a port (an
// Inject's host).
func parseRule(entry string, withPort bool) (rule, error) {
	s := strings.TrimSpace(entry)
	if s == "" {
		return rule{}, errors.New("empty entry")
	}
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return rule{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", entry, p)
		}
		host, port = h, n
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	if port != 0 && !withPort {
		return rule{}, fmt.Errorf("%q: name the host without a port (the allow entry says which ports)", entry)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return rule{}, fmt.Errorf("%q: an address with a zone cannot be allowed", entry)
		}
		if a.IsUnspecified() {
			return rule{}, fmt.Errorf("%q: the unspecified address reaches nothing", entry)
		}
		return rule{addr: a.Unmap(), port: port}, nil
	}
	r := rule{port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.suffix, host = true, rest
	}
	name, err := netguard.HostName(host)
	if err != nil {
		return rule{}, fmt.Errorf("%q: %v", entry, err)
	}
	switch {
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return rule{}, fmt.Errorf("%q names the host toold runs on; list its address and port instead (127.0.0.1:PORT)", entry)
	case r.suffix && isPublicSuffix(name):
		return rule{}, fmt.Errorf("%q would allow every name under the public suffix %q; name the domain (*.example.%s)", entry, name, name)
	case netguard.NumericHost(name):
		return rule{}, fmt.Errorf("%q reads as an IPv4 address in a form resolvers read differently; write the address dotted-decimal", entry)
	}
	r.name = name
	return r, nil
}

// isPublicSuffix says whether name is a public suffix itself (com,
// co.uk, github.io): a wildcard over it would allow strangers' domains.
func isPublicSuffix(name string) bool {
	suffix, _ := publicsuffix.PublicSuffix(name)
	return suffix == name
}

// target is a destination a run asked for.
type target struct {
	host string     // the normalized name, or the address's text
	addr netip.Addr // set when the host is an address literal
	port int
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// parseTarget reads an authority (CONNECT's "host:port", or a URL's host
// with defaultPort when it has none). The errors are for the run: they
// name what it sent.
func parseTarget(authority string, defaultPort int) (target, error) {
	host, port := authority, defaultPort
	if h, p, err := net.SplitHostPort(authority); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return target{}, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
		host, port = h, n
	} else if strings.HasPrefix(authority, "[") && strings.HasSuffix(authority, "]") {
		host = authority[1 : len(authority)-1]
	}
	if port == 0 {
		return target{}, fmt.Errorf("%q has no port", authority)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return target{}, errors.New("an address with a zone is refused")
		}
		a = a.Unmap()
		return target{host: a.String(), addr: a, port: port}, nil
	}
	name, err := netguard.HostName(host)
	if err != nil {
		return target{}, err
	}
	if netguard.NumericHost(name) {
		return target{}, fmt.Errorf("%q reads as an IPv4 address in a form resolvers read differently", host)
	}
	return target{host: name, port: port}, nil
}

// credentialRef is ${user:NAME} in an Inject's value.
var credentialRef = regexp.MustCompile(`\$\{user:([^}]*)\}`)

// UsesCredentials says whether p injects a principal's own credential
// (${user:NAME}): a run of it needs a Resolver.
func (p Policy) UsesCredentials() bool {
	for _, in := range p.Inject {
		if credentialRef.MatchString(in.Value) {
			return true
		}
	}
	return false
}

// Check reports every problem of p, each naming its key ("allow[1]:
// ..."). vault says whether toold has a credential vault: without one a
// ${user:NAME} value is refused, naming the setting that provides it.
func (p Policy) Check(vault bool) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(p.Allow) == 0 {
		fail("allow: empty: list the hosts the program may reach (network: false takes the network away, network: true gives all of it)")
	}
	var rules []rule
	for i, a := range p.Allow {
		r, err := parseRule(a, true)
		if err != nil {
			fail("allow[%d]: %v", i, err)
			continue
		}
		rules = append(rules, r)
	}
	for i, in := range p.Inject {
		checkInject(i, in, rules, vault, fail)
	}
	for i, f := range p.CAFiles {
		if _, err := readRoots(f); err != nil {
			fail("ca_files[%d]: %v", i, err)
		}
	}
	if p.MaxConnections < 0 || p.MaxBytes < 0 {
		fail("max_connections, max_bytes: must not be negative (0 takes the default)")
	}
	return errors.Join(errs...)
}

func checkInject(i int, in Inject, rules []rule, vault bool, fail func(string, ...any)) {
	r, err := parseRule(in.Host, false)
	if err != nil {
		fail("inject[%d].host: %v", i, err)
	} else if !slices.ContainsFunc(rules, func(a rule) bool { return covers(a, r) }) {
		fail("inject[%d].host: %q is not in allow: a host the run cannot reach needs no header", i, in.Host)
	}
	h := strings.ToLower(in.Header)
	switch {
	case !httpguts.ValidHeaderFieldName(in.Header):
		fail("inject[%d].header: %q is not a header name", i, in.Header)
	case forbiddenHeaders[h] || strings.HasPrefix(h, "proxy-"):
		fail("inject[%d].header: %s frames the request or the connection; toold does not set it", i, in.Header)
	}
	if !httpguts.ValidHeaderFieldValue(in.Value) || strings.TrimSpace(in.Value) == "" {
		fail("inject[%d].value: empty, or holds a control character", i)
	}
	for _, m := range credentialRef.FindAllStringSubmatch(in.Value, -1) {
		switch {
		case !credentials.ValidName(m[1]):
			fail("inject[%d].value: %q is not a credential name (1-64 of a-z A-Z 0-9 _ . -)", i, m[1])
		case !vault:
			fail("inject[%d].value: ${user:%s} is a caller's own credential, and toold has no credential vault: set credentials.key, or give the value from toold's environment (${VAR})", i, m[1])
		}
	}
	if rest := credentialRef.ReplaceAllString(in.Value, ""); strings.Contains(rest, "${") {
		fail("inject[%d].value: ${...} other than ${user:NAME} is left: environment variables are expanded when the configuration loads", i)
	}
}

// covers says whether allow rule a admits every name of inject rule r.
func covers(a, r rule) bool {
	switch {
	case r.addr.IsValid():
		return a.addr == r.addr
	case a.addr.IsValid():
		return false
	case r.suffix:
		return a.suffix && (r.name == a.name || strings.HasSuffix(r.name, "."+a.name))
	}
	return a.coversHost(target{host: r.name})
}

// forbiddenHeaders frame the request or the connection: an injected value
// there would smuggle a request rather than authenticate one.
var forbiddenHeaders = map[string]bool{"host": true, "content-length": true, "transfer-encoding": true,
	"connection": true, "keep-alive": true, "upgrade": true, "te": true, "trailer": true, "expect": true}

// readRoots reads a PEM file of certificates.
func readRoots(path string) ([]byte, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%q is not an absolute path", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(b), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return b, nil
}
