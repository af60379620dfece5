package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/netguard"
)

// Options are what toold gives every egress proxy, once, from its wiring
// (never from the configuration file).
type Options struct {
	// Metrics count refusals, destinations and bytes per tool; nil counts
	// nothing.
	Metrics *Metrics
	// Resolver looks allowed names up (default net.DefaultResolver); the
	// outbound guard checks every answer.
	Resolver *net.Resolver
	// Vault is toold's credential vault (internal/credentials): a run
	// whose values name ${user:NAME} asks it for the principal of the
	// run's call (auth.IdentityFrom of NewRun's ctx), at the first
	// request that needs the value. Without one such a policy is refused.
	Vault credentials.Resolver
}

// Resolver returns a credential of the call's principal by name: the
// credential interface, bound to one caller. It returns an error wrapping
// ErrNoCredential when the principal has none of that name.
type Resolver func(ctx context.Context, name string) ([]byte, error)

// callerOf binds v to who, the principal of one run's call.
func callerOf(v credentials.Resolver, who *auth.Identity) Resolver {
	return func(ctx context.Context, name string) ([]byte, error) {
		val, err := v.Resolve(ctx, who, name)
		if errors.Is(err, credentials.ErrMissing) {
			return nil, fmt.Errorf("%w: %w", ErrNoCredential, err)
		}
		return val, err
	}
}

// ErrNoCredential is a principal without the credential an injection
// names: the run's request is refused, saying which.
var ErrNoCredential = errors.New("the caller has no such credential")

// Compiled is a Policy checked and ready to serve runs: one per sandbox,
// made when toold wires the tool; each run gets a Run of its own.
type Compiled struct {
	rules    []rule
	allow    []string // as written, for refusals
	injects  []compiledInject
	roots    *x509.CertPool
	bundle   []byte // the system's roots and ca_files, PEM
	guards   map[int]*netguard.Guard
	maxConns int
	maxBytes int64
	opts     Options
	creds    bool // some value is ${user:NAME}
	// dialHook, set by the fuzz test only, sees every address the proxy
	// is about to dial; an error stops the dial.
	dialHook func(address string) error
}

// compiledInject is one Inject, its value split into literal text and
// credential names.
type compiledInject struct {
	idx    int
	host   rule
	header string // canonical
	parts  []valuePart
}

type valuePart struct {
	text       string
	credential string // when set, the part is this credential's value
}

// Compile checks p (Check) and prepares it: the allow rules, the roots
// toold verifies the real servers with (the system's and ca_files), and
// the outbound guard of each port, which admits exactly the addresses
// listed for it.
func Compile(p Policy, o Options) (*Compiled, error) {
	if err := p.Check(o.Vault != nil); err != nil {
		return nil, err
	}
	c := &Compiled{allow: slices.Clone(p.Allow), opts: o, guards: map[int]*netguard.Guard{},
		maxConns: p.MaxConnections, maxBytes: p.MaxBytes, creds: p.UsesCredentials()}
	if c.maxConns == 0 {
		c.maxConns = DefaultMaxConnections
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxBytes
	}
	for _, a := range p.Allow {
		r, _ := parseRule(a, true)
		c.rules = append(c.rules, r)
	}
	for _, in := range p.Inject {
		r, _ := parseRule(in.Host, false)
		c.injects = append(c.injects, compiledInject{idx: len(c.injects), host: r, header: http.CanonicalHeaderKey(in.Header), parts: splitValue(in.Value)})
	}
	if err := c.loadRoots(p.CAFiles); err != nil {
		return nil, err
	}
	if err := c.buildGuards(); err != nil {
		return nil, err
	}
	return c, nil
}

func splitValue(v string) []valuePart {
	var parts []valuePart
	last := 0
	for _, m := range credentialRef.FindAllStringSubmatchIndex(v, -1) {
		if m[0] > last {
			parts = append(parts, valuePart{text: v[last:m[0]]})
		}
		parts = append(parts, valuePart{credential: v[m[2]:m[3]]})
		last = m[1]
	}
	if last < len(v) {
		parts = append(parts, valuePart{text: v[last:]})
	}
	return parts
}

func (c *Compiled) loadRoots(files []string) error {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	c.bundle = systemBundle()
	for _, f := range files {
		pem, err := readRoots(f)
		if err != nil {
			return fmt.Errorf("ca_files: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("ca_files: %s: no certificate could be read", f)
		}
		if len(c.bundle) > 0 && c.bundle[len(c.bundle)-1] != '\n' {
			c.bundle = append(c.bundle, '\n')
		}
		c.bundle = append(c.bundle, pem...)
	}
	c.roots = pool
	if len(files) == 0 {
		c.bundle = nil // the run's own defaults hold the same roots
	}
	return nil
}

// buildGuards makes the outbound guard of every port an entry allows: it
// admits the addresses listed for that port and nothing else internal, so
// an allowed name that resolves to loopback or a private address is
// refused unless that address is listed too.
func (c *Compiled) buildGuards() error {
	for _, r := range c.rules {
		for _, port := range r.ports() {
			if _, ok := c.guards[port]; ok {
				continue
			}
			var addrs []string
			for _, a := range c.rules {
				if a.addr.IsValid() && slices.Contains(a.ports(), port) {
					addrs = append(addrs, a.addr.String())
				}
			}
			g, err := netguard.New(netguard.Policy{Allow: addrs, Resolver: c.opts.Resolver})
			if err != nil {
				return err
			}
			c.guards[port] = g
		}
	}
	return nil
}

// UsesCredentials says whether a run needs a Resolver (some value is a
// caller's own credential).
func (c *Compiled) UsesCredentials() bool { return c.creds }

// Describe is the policy in one phrase, for discovery and the start-up log.
func (c *Compiled) Describe() string {
	s := "allow-list through toold's egress proxy: " + strings.Join(c.allow, ", ")
	if len(c.injects) > 0 {
		var hosts []string
		for _, in := range c.injects {
			hosts = append(hosts, in.host.String())
		}
		s += "; headers injected for " + strings.Join(hosts, ", ")
	}
	return s
}

// allowed is the allow-list as a refusal names it.
func (c *Compiled) allowed() string { return strings.Join(c.allow, ", ") }

// injectFor is the injection of t's host, or nil.
func (c *Compiled) injectFor(t target) *compiledInject {
	for i := range c.injects {
		if c.injects[i].host.coversHost(t) {
			return &c.injects[i]
		}
	}
	return nil
}

// decide is the allow-list's answer for t: "" when allowed, else the
// reason.
func (c *Compiled) decide(t target) string {
	hostKnown := false
	for _, r := range c.rules {
		if r.allows(t) {
			return ""
		}
		hostKnown = hostKnown || r.coversHost(t)
	}
	if hostKnown {
		return ReasonPort
	}
	return ReasonNotAllowed
}
