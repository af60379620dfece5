package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toold/toold/internal/auth"
)

// The reasons a destination is refused, as network.refused names them.
const (
	ReasonNotAllowed     = "not_allowed"                 // the host is not in the allow-list
	ReasonPort           = "port_not_allowed"            // the host is, on other ports
	ReasonPrivateAddress = "private_address"             // it resolves to an address the list does not name
	ReasonTooldPort      = "toold_port"                  // one of toold's own listening ports
	ReasonConnections    = "max_connections"             // the run opened network.max_connections already
	ReasonBytes          = "max_bytes"                   // the run moved network.max_bytes already
	ReasonBadTarget      = "bad_target"                  // the request names no valid host:port
	ReasonPlainHTTP      = "plain_http_with_credentials" // http:// to a host that gets a header: use https
	ReasonHostMismatch   = "host_mismatch"               // a request inside a tunnel for another host
	ReasonUpgrade        = "upgrade_with_credentials"    // a protocol upgrade where responses are redacted
	ReasonNoCredential   = "credential_missing"          // the caller has not set the injected credential
	ReasonCredential     = "credential_unavailable"      // the credential could not be read
)

// ProxyVars are the variables that point a run at its proxy, upper and
// lower case; CAVars those that make it trust the run's bundle. A
// sandbox's own values of them are replaced.
var (
	ProxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"}
	CAVars    = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"}
)

// Report is what a run's network did, for its result.
type Report struct {
	// Connections counts the destinations reached (a CONNECT, or a plain
	// http:// request).
	Connections int `json:"connections"`
	// Bytes counts what moved between the run and its proxy, both ways.
	Bytes int64 `json:"bytes"`
	// Refused lists each refused destination once, with how often.
	Refused []Refusal `json:"refused"`
}

// Refusal is one destination the proxy refused, and why.
type Refusal struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// proxyUser is the user name of a run's proxy credentials.
const proxyUser = "toold"

// maxRefusals bounds a report's list; the counts go on.
const maxRefusals = 64

// RunOptions are one run's.
type RunOptions struct {
	// Tool names the run in metrics (the tool, the MCP server, the
	// consultation provider).
	Tool string
	// Credentials resolves ${user:NAME} for the call's principal; nil
	// takes Options.Vault bound to the principal NewRun's ctx carries
	// (auth.IdentityFrom), and without a vault refuses such a value's
	// requests.
	Credentials Resolver
	// DenyPorts are toold's own listening ports: refused on every host.
	DenyPorts []int
	// Token, when set, is what every request must carry as its proxy
	// credentials (user toold): a proxy listening where other programs
	// of the host reach it too (macOS: toold's loopback) serves the run
	// only. Env puts it in the proxy's URL.
	Token string
}

// Run is one run's egress proxy: it serves the listener the run reaches
// (inside the run's network namespace) until Close, which the launcher
// calls when the run ends. Every request is bounded by the run's context.
type Run struct {
	c     *Compiled
	ctx   context.Context
	o     RunOptions
	ca    *authority // nil without injections
	srv   *http.Server
	tls   *http.Transport // to the real servers of injected hosts
	plain *http.Transport // plain http:// destinations

	opened atomic.Int64 // destinations counted against maxConns
	open   atomic.Int64 // client connections held now
	bytes  atomic.Int64
	over   atomic.Bool // past maxBytes, noted

	closeOnce sync.Once
	final     *Report

	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup // requests being served
	conns   map[net.Conn]struct{}
	refused []Refusal
	values  map[int]*injected // resolved values, per injection
}

// injected is an injection's value for this run.
type injected struct {
	value   string
	secrets [][]byte
	reason  string // a refusal instead of a value
	detail  string
}

// NewRun makes the proxy of one run; ctx is the run's (its call's
// deadline, its span). Nothing listens until Serve.
func (c *Compiled) NewRun(ctx context.Context, o RunOptions) (*Run, error) {
	if o.Credentials == nil && c.creds && c.opts.Vault != nil {
		// The caller's own secrets: resolved for the principal of this
		// run's call, captured now, whoever asks the proxy later.
		o.Credentials = callerOf(c.opts.Vault, auth.IdentityFrom(ctx))
	}
	r := &Run{c: c, ctx: ctx, o: o, conns: map[net.Conn]struct{}{}, values: map[int]*injected{}}
	if len(c.injects) > 0 {
		var hosts []rule
		for _, in := range c.injects {
			hosts = append(hosts, in.host)
		}
		var err error
		if r.ca, err = newAuthority(hosts); err != nil {
			return nil, err
		}
	}
	r.srv = &http.Server{Handler: r, BaseContext: func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: log.New(io.Discard, "", 0), ConnContext: withConn}
	r.tls = r.transport(true)
	r.plain = r.transport(false)
	return r, nil
}

// Bundle is the PEM file the run trusts (the system's roots, ca_files and
// the run's own authority), or nil when the run needs none of its own.
func (r *Run) Bundle() []byte {
	if r.ca == nil && r.c.bundle == nil {
		return nil
	}
	b := r.c.bundle
	if b == nil {
		b = systemBundle()
	}
	out := slices.Clip(b)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	if r.ca != nil {
		out = append(out, r.ca.certPEM...)
	}
	return out
}

// Env is the run's variables: the proxy at addr (host:port as the run
// dials it) for every scheme, and the bundle at bundle when there is one
// ("" leaves the run's trust as it is). NO_PROXY names only localhost,
// the run's own loopback: an address such as 127.0.0.1 goes through the
// proxy, which reaches toold's side when the allow-list names it.
func (r *Run) Env(addr, bundle string) []string {
	proxy := "http://" + addr
	if r.o.Token != "" {
		proxy = "http://" + proxyUser + ":" + r.o.Token + "@" + addr
	}
	var env []string
	for _, v := range ProxyVars {
		if strings.EqualFold(v, "NO_PROXY") {
			env = append(env, v+"=localhost")
		} else {
			env = append(env, v+"="+proxy)
		}
	}
	if bundle != "" {
		for _, v := range CAVars {
			env = append(env, v+"="+bundle)
		}
	}
	return env
}

// Serve answers the run on ln until Close; it returns at once.
func (r *Run) Serve(ln net.Listener) {
	go func() { _ = r.srv.Serve(&countingListener{Listener: ln, r: r}) }()
}

// Close stops the proxy: the listener, every connection, every request
// (each returns once its connections are closed), and reports; again, it
// returns the same report.
func (r *Run) Close() *Report {
	r.closeOnce.Do(func() { r.final = r.close() })
	return r.final
}

func (r *Run) close() *Report {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	_ = r.srv.Close()
	r.wg.Wait()
	r.tls.CloseIdleConnections()
	r.plain.CloseIdleConnections()
	r.c.opts.Metrics.moved(r.o.Tool, r.bytes.Load())
	return r.report()
}

func (r *Run) report() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Report{Connections: int(r.opened.Load()), Bytes: r.bytes.Load(), Refused: append([]Refusal{}, r.refused...)}
}

// enter counts a request being served; false once the run is closed.
func (r *Run) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// track keeps a connection to close at Close (hijacked client
// connections, their upstreams); false once the run is closed.
func (r *Run) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Run) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	_ = c.Close()
}

// note records a refusal: in the report (once per destination and
// reason, counted) and in the metric.
func (r *Run) note(host string, port int, reason string) {
	if len(host) > 253 { // a run's garbage in a request line: the report stays small
		host = strings.ToValidUTF8(host[:253], "") + "…"
	}
	r.c.opts.Metrics.refuse(r.o.Tool)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.refused {
		if f := &r.refused[i]; f.Host == host && f.Port == port && f.Reason == reason {
			f.Count++
			return
		}
	}
	if len(r.refused) < maxRefusals {
		r.refused = append(r.refused, Refusal{Host: host, Port: port, Reason: reason, Count: 1})
	}
}

// refuse answers a refused request: the status, a header naming the
// reason, and a body an agent can act on, naming the host and the
// tool's allow-list.
func (r *Run) refuse(w http.ResponseWriter, host string, port int, reason string, status int, why string) {
	r.note(host, port, reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Toold-Egress-Refused", reason)
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	dest := host
	if port != 0 {
		dest = net.JoinHostPort(host, strconv.Itoa(port))
	}
	fmt.Fprintf(w, "toold egress proxy: %s refused (%s): %s\nthis tool's allow-list: %s\n", dest, reason, why, r.c.allowed())
}

// admit applies the allow-list, toold's ports and the run's connection
// bound to t; "" admits it (and counts it), else the reason and why.
func (r *Run) admit(t target) (string, string) {
	if slices.Contains(r.o.DenyPorts, t.port) {
		return ReasonTooldPort, fmt.Sprintf("port %d is one of toold's own listeners, which no program it runs may reach", t.port)
	}
	switch r.c.decide(t) {
	case ReasonPort:
		return ReasonPort, fmt.Sprintf("%s is allowed, but not on port %d", t.host, t.port)
	case ReasonNotAllowed:
		return ReasonNotAllowed, fmt.Sprintf("%s is not in this tool's allow-list (sandbox.network.allow)", t.host)
	}
	if n := r.opened.Add(1); n > int64(r.c.maxConns) {
		r.opened.Add(-1)
		return ReasonConnections, fmt.Sprintf("the run opened %d destinations, its bound (sandbox.network.max_connections)", r.c.maxConns)
	}
	r.c.opts.Metrics.connect(r.o.Tool)
	return "", ""
}

// overBytes reports the run past its byte bound, once.
func (r *Run) overBytes() {
	if r.over.CompareAndSwap(false, true) {
		r.note("", 0, ReasonBytes)
	}
}

// errOverBytes ends a connection of a run past network.max_bytes.
var errOverBytes = errors.New("the run moved network.max_bytes through its proxy")
