package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/tools"
)

// A per-user server (auth:, or a header naming ${user:name}) is called by
// each principal over a session of their own, whose every request carries
// their credential, resolved at that moment: the server sees each caller
// as themselves, and a session is never shared between two. Its tools are
// listed over the session of a connected principal (the lister, kept in
// the store so every replica and every restart lists with the same one,
// another connected one when it disconnects).

// Vault is what per-user servers need of the credentials vault.
type Vault interface {
	credentials.Resolver
	Holders(ctx context.Context, connection string) ([]string, error)
	SecretHolders(ctx context.Context, name string) ([]string, error)
	Lister(ctx context.Context, connection string) (string, error)
	SetLister(ctx context.Context, connection, principal string) error
}

// idleSession is how long a principal's session stays open unused.
const idleSession = 10 * time.Minute

// userSession is a principal's session with a per-user server.
type userSession struct {
	sess *mcp.ClientSession
	used time.Time
}

// perUser is the per-user part of a server.
type perUser struct {
	conn    *delegate.Connection
	headers map[string]credentials.Template
	mu      sync.Mutex
	users   map[string]*userSession
	// wake ends a wait for a connected principal to list with.
	wake chan struct{}
}

// errNoLister: nobody has connected the server yet, so its tools cannot be
// listed.
var errNoLister = errors.New("no caller has connected this server yet: its tools are listed once one does")

// setupPerUser prepares a per-user server: its connection with the
// delegation manager, and its headers naming vault credentials.
func (m *Manager) setupPerUser(s *server, base *http.Client) error {
	h, err := s.cfg.userHeaders()
	if err != nil {
		return err
	}
	pu := &perUser{headers: h, users: map[string]*userSession{}, wake: make(chan struct{}, 1)}
	if len(h) > 0 && m.opts.Vault == nil {
		return errors.New("headers: ${user:...} names the caller's own credential, and toold has no credentials vault (set credentials.key, keep the state store on)")
	}
	if a := s.cfg.Auth; a.delegated() {
		if m.opts.Delegate == nil || m.opts.Vault == nil {
			return errors.New("auth: acting as the caller needs the credentials vault (set credentials.key, keep the state store on)")
		}
		if pu.conn, err = m.opts.Delegate.Add(delegate.Downstream{Name: s.cfg.Name, URL: s.cfg.URL, MCP: true, OAuth: a.OAuth,
			Exchange: a.TokenExchange, Passthrough: a.Passthrough, Client: base, AllowHTTP: s.cfg.AllowHTTP}); err != nil {
			return err
		}
	}
	s.pu = pu
	return nil
}

// clientFor is the server's HTTP client for who: the guarded client,
// the static headers, and who's own credentials on every request.
func (s *server) clientFor(who *auth.Identity) *http.Client {
	cp := *s.base
	rt := cp.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if s.pu.conn != nil {
		rt = s.pu.conn.Transport(rt, who)
	}
	if len(s.pu.headers) > 0 {
		rt = userHeaderTransport{base: rt, who: who, vault: s.m.opts.Vault, h: s.pu.headers}
	}
	static := map[string]string{}
	for k, v := range s.cfg.Headers {
		if _, perUser := s.pu.headers[k]; !perUser {
			static[k] = v
		}
	}
	if len(static) > 0 {
		rt = headerTransport{base: rt, h: static}
	}
	cp.Transport = rt
	return &cp
}

// userHeaderTransport sets the headers naming who's vault credentials.
type userHeaderTransport struct {
	base  http.RoundTripper
	who   *auth.Identity
	vault credentials.Resolver
	h     map[string]credentials.Template
}

func (t userHeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, k := range slices.Sorted(maps.Keys(t.h)) {
		tmpl := t.h[k]
		v, err := tmpl.Render(r.Context(), t.vault, t.who)
		if err != nil {
			return nil, err
		}
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// credential checks that who has what the server needs, without the
// network when it is in memory: the refusal a caller without it gets at
// once.
func (s *server) credential(ctx context.Context, who *auth.Identity) error {
	if s.pu.conn != nil {
		if _, err := s.pu.conn.Credential(ctx, who); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.pu.headers)) {
		tmpl := s.pu.headers[k]
		if _, err := tmpl.Render(ctx, s.m.opts.Vault, who); err != nil {
			return err
		}
	}
	return nil
}

// userSession returns who's session, connecting one if they have none.
func (s *server) userSession(ctx context.Context) (*mcp.ClientSession, error) {
	who := auth.IdentityFrom(ctx)
	if err := s.credential(ctx, who); err != nil {
		if te := delegate.ToolError(err, fmt.Sprintf("the MCP server %q", s.cfg.Name)); te != nil {
			return nil, te
		}
		return nil, tools.Errorf(tools.SystemError, "the caller's credential for the MCP server %q could not be read", s.cfg.Name).Wrap(err)
	}
	p := credentials.Principal(who)
	s.pu.mu.Lock()
	if us := s.pu.users[p]; us != nil {
		us.used = time.Now()
		s.pu.mu.Unlock()
		return us.sess, nil
	}
	s.pu.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	sess, err := connectBounded(cctx, s.client(), s.transportFor(who))
	if err != nil {
		if te := delegate.ToolError(err, fmt.Sprintf("the MCP server %q", s.cfg.Name)); te != nil {
			return nil, te
		}
		s.log.Warn("a caller's session with the MCP server could not be opened", zap.Error(err))
		return nil, tools.Errorf(tools.OverloadError, "the MCP server %q could not be reached for this caller", s.cfg.Name).
			WithCode(tools.CodeUpstreamUnavailable).WithRetryAfter(time.Second).WithSuggestion("retry in a moment")
	}
	s.pu.mu.Lock()
	if us := s.pu.users[p]; us != nil { // another call of theirs connected meanwhile
		s.pu.mu.Unlock()
		_ = sess.Close()
		return us.sess, nil
	}
	s.pu.users[p] = &userSession{sess: sess, used: time.Now()}
	s.pu.mu.Unlock()
	go func() { // a session that ends is forgotten
		_ = sess.Wait()
		s.forgetSession(p, sess)
	}()
	return sess, nil
}

func (s *server) transportFor(who *auth.Identity) mcp.Transport {
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, MaxRetries: -1, HTTPClient: s.clientFor(who)}
}

// client is an MCP client of the server's: its list_changed notices
// re-list the server, its progress notices reach their calls.
func (s *server) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "toold", Version: s.m.opts.Version}, &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { s.askRelist() },
		ProgressNotificationHandler: s.onProgress,
		KeepAlive:                   30 * time.Second,
	})
}

// forgetSession drops a principal's session if it is still theirs, and
// closes it.
func (s *server) forgetSession(p string, sess *mcp.ClientSession) {
	s.pu.mu.Lock()
	us := s.pu.users[p]
	cur := us != nil && (sess == nil || us.sess == sess)
	if cur {
		delete(s.pu.users, p)
	}
	s.pu.mu.Unlock()
	if cur {
		_ = us.sess.Close()
	}
}

// reap closes the sessions unused for idleSession.
func (s *server) reap() {
	s.pu.mu.Lock()
	var idle []*userSession
	for p, us := range s.pu.users {
		if time.Since(us.used) > idleSession {
			idle = append(idle, us)
			delete(s.pu.users, p)
		}
	}
	s.pu.mu.Unlock()
	for _, us := range idle {
		_ = us.sess.Close()
	}
}

// lister is the principal to list the server's tools as: the one recorded
// in the store if they still have what the server needs, else the first
// principal who has (recorded then).
func (s *server) lister(ctx context.Context) (*auth.Identity, error) {
	v := s.m.opts.Vault
	if p, err := v.Lister(ctx, s.cfg.Name); err == nil && p != "" {
		if who := credentials.IdentityOf(p); s.credential(ctx, who) == nil {
			return who, nil
		}
	}
	var candidates []string
	var err error
	switch {
	case s.pu.conn != nil && s.pu.conn.IsOAuth():
		candidates, err = v.Holders(ctx, s.cfg.Name)
	case s.pu.conn == nil:
		for _, t := range s.pu.headers {
			candidates, err = v.SecretHolders(ctx, t.Refs()[0])
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for _, p := range candidates {
		who := credentials.IdentityOf(p)
		if s.credential(ctx, who) == nil {
			if err := v.SetLister(ctx, s.cfg.Name, p); err != nil {
				return nil, err
			}
			return who, nil
		}
	}
	return nil, errNoLister
}

// Connected tells the server named connection that who connected it: a
// server still waiting for someone to list with tries at once.
func (m *Manager) Connected(connection string, who *auth.Identity) {
	for _, s := range m.servers {
		if s.cfg.Name == connection && s.pu != nil {
			select {
			case s.pu.wake <- struct{}{}:
			default:
			}
		}
	}
}

// Disconnected closes who's session with the server named connection,
// and, when they listed its tools, lets another connected principal list
// them from the next connection on.
func (m *Manager) Disconnected(connection string, who *auth.Identity) {
	for _, s := range m.servers {
		if s.cfg.Name == connection && s.pu != nil {
			s.forgetSession(credentials.Principal(who), nil)
		}
	}
}
