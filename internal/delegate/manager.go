// Package delegate makes toold act as the user towards what it calls: an
// OAuth client of each downstream's authorization server, per principal
// (the MCP authorization rules: a 401's WWW-Authenticate, the protected
// resource metadata of RFC 9728, the server metadata of RFC 8414 / OpenID
// discovery, dynamic registration of RFC 7591, the authorization code
// grant with PKCE S256 and the resource indicator of RFC 8707, refresh
// before expiry and once more on a 401, revocation of RFC 7009); token
// exchange (RFC 8693) of the caller's own token; and passthrough of it
// where its audience names the downstream.
//
// Tokens live in the credentials vault (sealed in the state store, shared
// by every replica); a replica keeps the ones it uses in memory, so a call
// with a cached token costs a map lookup. Every request to an
// authorization server goes through the downstream's own outbound guard.
// A token is never logged, never written into an error, a record or an
// event.
//
// The consent step: a caller without a connection gets an
// AuthorizationRequired naming a toold URL (/connections/start?flow=…,
// sealed, bound to them, short-lived); their browser opens it, confirms,
// and is sent to the authorization server with a single-use state bound
// to the principal and to that browser (a cookie); the server sends it
// back to /connections/callback, which trades the code for tokens.
package delegate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
)

// Paths of the consent step.
const (
	StartPath    = "/connections/start"
	CallbackPath = "/connections/callback"
)

// Options configure a Manager.
type Options struct {
	// Vault keeps the tokens; it may be given after New (SetVault).
	Vault *credentials.Vault
	// Keys seal the start URLs; a key derived from it signs states.
	Keys *credentials.Keyring
	// PublicURL is where browsers reach toold (server.public_url, or the
	// address it listens on), for the callback and start URLs; it may be
	// set after New (SetPublicURL), once the listener's port is known.
	PublicURL string
	Logger    *zap.Logger
	// OnConnect and OnDisconnect are told when who connected or removed a
	// connection (the audit log, an upstream's listing).
	OnConnect    func(ctx context.Context, who *auth.Identity, connection string)
	OnDisconnect func(ctx context.Context, who *auth.Identity, connection string)
	Now          func() time.Time
}

// Manager holds the connections of one toold.
type Manager struct {
	opts  Options
	log   *zap.Logger
	now   func() time.Time
	mac   []byte
	mu    sync.RWMutex
	base  string
	conns map[string]*Connection
	// inbound: a connection exchanges or passes on the caller's token.
	inbound atomic.Bool
}

// New builds a Manager.
func New(o Options) (*Manager, error) {
	if o.Keys == nil {
		return nil, errors.New("delegate: the credentials keys are required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Manager{opts: o, log: o.Logger, now: o.Now, conns: map[string]*Connection{},
		mac: o.Keys.Derive("toold oauth client states")}
	m.SetPublicURL(o.PublicURL)
	return m, nil
}

// SetVault gives the manager its vault, once the store is open (tools
// register their connections before); call it before serving.
func (m *Manager) SetVault(v *credentials.Vault) { m.opts.Vault = v }

// SetPublicURL sets where browsers reach toold.
func (m *Manager) SetPublicURL(u string) {
	m.mu.Lock()
	m.base = strings.TrimSuffix(u, "/")
	m.mu.Unlock()
}

func (m *Manager) publicURL() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.base
}

// CallbackURL is the redirect URI toold registers and sends.
func (m *Manager) CallbackURL() string { return m.publicURL() + CallbackPath }

// Connection returns a connection by name, or nil.
func (m *Manager) Connection(name string) *Connection {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.conns[name]
}

// Names lists the connections, sorted.
func (m *Manager) Names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for n, c := range m.conns {
		if c.oauth != nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// WantsInbound reports whether a connection exchanges or passes on the
// caller's own token (so requests carry it in their context).
func (m *Manager) WantsInbound() bool {
	return m != nil && m.inbound.Load()
}

// Downstream is what calls as the user: an MCP server or an HTTP API tool.
type Downstream struct {
	// Name is the connection's name: the server's, or the tool's.
	Name string
	// URL is where requests go: the MCP server's endpoint, the API's URL.
	URL string
	// MCP: the authorization server is discovered from the server.
	MCP         bool
	OAuth       *OAuthConfig
	Exchange    *ExchangeConfig
	Passthrough bool
	// Client makes every request to the authorization servers, through
	// the downstream's own outbound guard; AllowHTTP is its policy, for
	// the URLs documents name.
	Client    *http.Client
	AllowHTTP bool
}

// Add registers a downstream; a name used twice is refused.
func (m *Manager) Add(d Downstream) (*Connection, error) {
	if d.Client == nil {
		return nil, errors.New("delegate: a downstream needs its guarded client")
	}
	n := 0
	for _, on := range []bool{d.OAuth != nil, d.Exchange != nil, d.Passthrough} {
		if on {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("auth: give one of oauth, token_exchange and passthrough")
	}
	if d.OAuth != nil {
		if err := d.OAuth.Check(d.MCP); err != nil {
			return nil, fmt.Errorf("auth.oauth: %w", err)
		}
	}
	if d.Exchange != nil {
		if err := d.Exchange.Check(); err != nil {
			return nil, fmt.Errorf("auth.token_exchange: %w", err)
		}
	}
	c := newConnection(m, d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.conns[d.Name]; dup {
		return nil, fmt.Errorf("delegate: the connection name %q is used twice", d.Name)
	}
	m.conns[d.Name] = c
	if d.Exchange != nil || d.Passthrough {
		m.inbound.Store(true)
	}
	return c, nil
}

// sign is a short MAC of what a state or a cookie binds.
func (m *Manager) sign(parts ...string) []byte {
	h := hmac.New(sha256.New, m.mac)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:18]
}
