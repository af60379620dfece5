// Package upstream hosts MCP servers as toold tools. Each server declared
// in mcp.servers is connected (a process in the command tools' sandbox, or
// Streamable HTTP), its tools are listed and served as "<server>.<tool>" in
// the category mcp, so every call to them passes toold's pipeline:
// validation by toold's own compiled schemas, sanitizers both ways, the
// tool's bulkhead plus a per-server cap, the deadline, metrics and logs.
//
// An upstream failure stays contained: a server that crashes or becomes
// unreachable is reconnected with backoff; calls in flight end with a
// retryable system_error (upstream_unavailable), new calls are refused with
// 503 and Retry-After until it is back; initialize and tools/list are
// bounded by a timeout; a notifications/tools/list_changed re-lists the
// server and swaps its tools in the registry at once.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// Options are what the servers need from the rest of toold.
type Options struct {
	// SetTools replaces every tool of a source (a server's name) with ts
	// and reports the tools it could not serve (registry.Live.SetSource).
	SetTools func(source string, ts []tools.Tool) []error
	// Pins, when set, holds back the tools of pinned servers whose
	// definitions changed (pin.go); SetToolsHolding then serves a
	// server's tools with those held (registry.Live.SetSourceHolding).
	Pins            Pinner
	SetToolsHolding func(source string, ts []tools.Tool, held map[string]string) []error
	// Launcher starts stdio servers in their sandbox.
	Launcher   *launch.Launcher
	Logger     *zap.Logger
	Registerer prometheus.Registerer
	// Version is toold's, shown to the servers.
	Version string
	// Backoff bounds the waits between reconnection attempts (default
	// 200ms doubling to 30s, with jitter).
	MinBackoff, MaxBackoff time.Duration
	// Vault and Delegate serve the servers that call as each caller
	// (auth:, ${user:name} in headers); nil refuses such a server.
	Vault    Vault
	Delegate *delegate.Manager
}

// Manager runs the upstream servers; build it with New, Start it, Close it.
type Manager struct {
	opts    Options
	log     *zap.Logger
	metrics *metrics
	wg      sync.WaitGroup
	// mu guards servers (replaced by Apply) and the context servers run
	// in (ctx, cancel: set by Start).
	mu      sync.Mutex
	servers []*server
	ctx     context.Context
	cancel  context.CancelFunc
}

// list is the servers now.
func (m *Manager) list() []*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.servers)
}

// New checks every server's declaration; nothing is started yet.
func New(cfgs []Config, opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	m := &Manager{opts: opts, log: opts.Logger, metrics: newMetrics(opts.Registerer)}
	var err error
	m.servers, err = m.declare(cfgs)
	return m, err
}

// declare checks every server's declaration and makes its server, not
// started; the error lists every problem.
func (m *Manager) declare(cfgs []Config) ([]*server, error) {
	opts := m.opts
	var out []*server
	var errs []error
	seen := map[string]bool{}
	for i, c := range cfgs {
		if err := c.Check(); err != nil {
			errs = append(errs, fmt.Errorf("mcp.servers[%d] (%s): %w", i, c.Name, err))
			continue
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("mcp.servers[%d] (%s): the name is used twice", i, c.Name))
			continue
		}
		if opts.Pins != nil && opts.SetToolsHolding == nil {
			errs = append(errs, fmt.Errorf("mcp.servers[%d] (%s): pins without SetToolsHolding", i, c.Name))
			continue
		}
		if c.Command != "" && opts.Launcher == nil {
			errs = append(errs, fmt.Errorf("mcp.servers[%d] (%s): no command sandbox to start it in", i, c.Name))
			continue
		}
		seen[c.Name] = true
		s := newServer(c, m)
		if c.URL != "" {
			g, err := c.guard()
			if err != nil {
				errs = append(errs, fmt.Errorf("mcp.servers[%d] (%s): %w", i, c.Name, err))
				continue
			}
			// No overall timeout: a stream may stay open; every call
			// has its own deadline.
			s.base = g.Client()
			s.http = withHeaders(s.base, c.Headers)
			if c.PerUser() {
				if err := m.setupPerUser(s, s.base); err != nil {
					errs = append(errs, fmt.Errorf("mcp.servers[%d] (%s): %w", i, c.Name, err))
					continue
				}
			}
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// Apply makes cfgs the servers while the manager runs (a reload). The
// declarations are checked first: with any problem nothing changes. A
// server whose declaration is the same as before keeps its connection,
// its process and its sessions; one removed or changed is stopped and its
// tools leave the registry; one new or changed is started (in the
// background: its tools join when it answers). It returns the names of
// the servers stopped and started.
func (m *Manager) Apply(cfgs []Config) (stopped, started []string, err error) {
	next, err := m.declare(cfgs)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	old := map[string]*server{}
	for _, s := range m.servers {
		old[s.cfg.Name] = s
	}
	var fresh, gone []*server
	for i, s := range next {
		if o := old[s.cfg.Name]; o != nil && reflect.DeepEqual(o.cfg, s.cfg) {
			next[i] = o
			delete(old, s.cfg.Name)
			continue
		}
		fresh = append(fresh, s)
	}
	for _, s := range old {
		gone = append(gone, s)
	}
	m.servers = next
	ctx := m.ctx
	m.mu.Unlock()
	for _, s := range gone {
		if s.stop != nil {
			s.stop()
			<-s.done
		}
		m.opts.SetTools(s.cfg.Name, nil)
		stopped = append(stopped, s.cfg.Name)
	}
	for _, s := range fresh {
		if ctx != nil {
			m.startServer(ctx, s, func() {})
		}
		started = append(started, s.cfg.Name)
	}
	slices.Sort(stopped)
	slices.Sort(started)
	return stopped, started, nil
}

// startServer runs s until ctx ends or s.stop is called.
func (m *Manager) startServer(ctx context.Context, s *server, firstDone func()) {
	sctx, cancel := context.WithCancel(ctx)
	s.stop, s.done = cancel, make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(s.done)
		s.run(sctx, firstDone)
	}()
}

// Start connects every server in the background. It waits for each
// server's first attempt, at most its connect timeout, so that the tools
// of the servers that answer are served from the first request; the others
// keep being retried.
func (m *Manager) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.ctx, m.cancel = ctx, cancel
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	var first sync.WaitGroup
	for _, s := range servers {
		first.Add(1)
		m.startServer(ctx, s, first.Done)
	}
	first.Wait()
}

// Close disconnects every server and stops their processes.
func (m *Manager) Close() error {
	m.mu.Lock()
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
	return nil
}

// Ready returns an error naming the required servers not connected now.
func (m *Manager) Ready() error {
	var down []string
	for _, s := range m.list() {
		if s.cfg.Required && !s.up() {
			down = append(down, s.cfg.Name)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("required MCP servers not connected: %s", strings.Join(down, ", "))
	}
	return nil
}

// States reports each server's state, for discovery and start-up lines.
func (m *Manager) States() map[string]string {
	out := map[string]string{}
	for _, s := range m.list() {
		out[s.cfg.Name] = s.state()
	}
	return out
}

// server is one upstream MCP server and its connection.
type server struct {
	cfg  Config
	m    *Manager
	log  *zap.Logger
	http *http.Client // through the outbound guard; servers reached by url
	base *http.Client // the same, without the configured headers
	// pu is set for a server that calls as each caller (see peruser.go).
	pu *perUser

	mu       sync.Mutex
	sess     *mcp.ClientSession
	retryAt  time.Time // when a server that is down is tried again
	progress map[string]*progressSink
	relist   chan struct{}
	gen      listGen // the re-lists of relist (RelistNow)
	// stop ends the server's run, done is closed when it has (startServer).
	stop context.CancelFunc
	done chan struct{}
}

func newServer(c Config, m *Manager) *server {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	s := &server{cfg: c, m: m, log: m.log.With(zap.String("server", c.Name)),
		progress: map[string]*progressSink{}, relist: make(chan struct{}, 1)}
	m.metrics.init(c.Name)
	return s
}

func (s *server) up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess != nil
}

func (s *server) state() string {
	if s.up() {
		return "up"
	}
	return "down"
}

// session returns the live session, or the refusal for a server that is
// down, with when to retry.
func (s *server) session() (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	retry := max(time.Until(s.retryAt), time.Second)
	return nil, tools.Errorf(tools.OverloadError, "the MCP server %q is not connected", s.cfg.Name).WithCode(tools.CodeUpstreamUnavailable).
		WithRetryAfter(retry).WithSuggestion("retry after %v; toold reconnects on its own", retry.Round(time.Second))
}

// drop ends sess if it is still the server's session (or a caller's).
func (s *server) drop(sess *mcp.ClientSession) {
	if s.pu != nil {
		s.pu.mu.Lock()
		for p, us := range s.pu.users {
			if us.sess == sess {
				delete(s.pu.users, p)
			}
		}
		s.pu.mu.Unlock()
	}
	s.mu.Lock()
	cur := s.sess == sess
	if cur {
		s.sess = nil
	}
	s.mu.Unlock()
	if cur {
		_ = sess.Close()
	}
}

// run connects, serves and reconnects until ctx ends. firstDone is called
// once the first attempt has ended either way.
func (s *server) run(ctx context.Context, firstDone func()) {
	backoff := s.m.opts.MinBackoff
	once := sync.Once{}
	for ctx.Err() == nil {
		conn, err := s.connect(ctx)
		if s.pu != nil && errors.Is(err, errNoLister) {
			once.Do(firstDone)
			s.log.Info("MCP server waits for a caller to connect it", zap.String("connection", s.cfg.Name))
			select { // someone connecting wakes it; another replica's connection is found a while later
			case <-ctx.Done():
			case <-s.pu.wake:
			case <-time.After(s.m.opts.MaxBackoff):
			}
			continue
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("MCP server unavailable", zap.Error(err), zap.Duration("retry_in", backoff))
		}
		once.Do(firstDone)
		if err == nil {
			backoff = s.m.opts.MinBackoff
			s.serve(ctx, conn)
			if ctx.Err() != nil {
				return
			}
			s.m.metrics.reconnects.WithLabelValues(s.cfg.Name).Inc()
		}
		// Full jitter around the backoff, so servers that died together
		// do not come back in step.
		wait := backoff/2 + rand.N(backoff/2+1)
		s.mu.Lock()
		s.retryAt = time.Now().Add(wait)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		backoff = min(backoff*2, s.m.opts.MaxBackoff)
	}
}

// conn is one established connection.
type conn struct {
	sess *mcp.ClientSession
	proc *launch.Process // nil over HTTP
}

func (c *conn) close() {
	_ = c.sess.Close()
	if c.proc != nil {
		c.proc.Stop(2 * time.Second)
	}
}

// exit stops a stdio server's process, as close does, so that all it
// wrote to stderr has been read, and says how it ended and why: a server
// that dies is seen first as its session ending.
func (c *conn) exit() []zap.Field {
	if c.proc == nil {
		return nil
	}
	c.proc.Stop(2 * time.Second)
	return []zap.Field{zap.Error(c.proc.Err()), zap.String("stderr", stderrReason(c.proc.Stderr()))}
}

// connect starts or reaches the server, initializes a session and lists
// its tools, all within the connect timeout, and serves the tools.
func (s *server) connect(ctx context.Context) (*conn, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	c := &conn{}
	var transport mcp.Transport
	if s.cfg.Command != "" {
		p, err := s.m.opts.Launcher.Start(s.cfg.processSpec())
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", s.cfg.Command, err)
		}
		c.proc = p
		transport = &mcp.IOTransport{Reader: p.Stdout, Writer: p.Stdin, MaxLineLength: s.cfg.MaxMessageBytes}
	} else if s.pu != nil {
		who, err := s.lister(cctx)
		if err != nil {
			return nil, err
		}
		transport = s.transportFor(who)
	} else {
		transport = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, MaxRetries: -1, HTTPClient: s.http}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toold", Version: s.m.opts.Version}, &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { s.askRelist() },
		ProgressNotificationHandler: s.onProgress,
		KeepAlive:                   30 * time.Second,
	})
	// Connect's context bounds the handshake; the session outlives it.
	sess, err := connectBounded(cctx, client, transport)
	if err != nil {
		if c.proc != nil {
			c.proc.Stop(0)
			if why := stderrReason(c.proc.Stderr()); why != "" {
				err = fmt.Errorf("%w (stderr: %s)", err, why)
			}
		}
		return nil, fmt.Errorf("initialize: %w", err)
	}
	c.sess = sess
	if err := s.list(cctx, sess); err != nil {
		c.close()
		return nil, err
	}
	s.mu.Lock()
	s.sess = sess
	s.mu.Unlock()
	s.m.metrics.up.WithLabelValues(s.cfg.Name).Set(1)
	s.log.Info("MCP server connected", zap.String("protocol", sess.InitializeResult().ProtocolVersion),
		zap.String("server_name", sess.InitializeResult().ServerInfo.Name))
	return c, nil
}

// connectBounded runs Connect and gives up at ctx's deadline even if the
// transport does not watch ctx (a process that never answers initialize).
func connectBounded(ctx context.Context, client *mcp.Client, t mcp.Transport) (*mcp.ClientSession, error) {
	type result struct {
		sess *mcp.ClientSession
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sess, err := client.Connect(ctx, t, nil)
		done <- result{sess, err}
	}()
	select {
	case r := <-done:
		return r.sess, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.sess != nil {
				_ = r.sess.Close()
			}
		}()
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// serve waits for the connection to end (or ctx), re-listing on every
// list_changed; then the server is down and its calls are refused.
func (s *server) serve(ctx context.Context, c *conn) {
	ended := make(chan struct{})
	go func() {
		_ = c.sess.Wait()
		close(ended)
	}()
	var procDone <-chan struct{}
	if c.proc != nil {
		procDone = c.proc.Done()
	}
	var reap <-chan time.Time
	if s.pu != nil {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		reap = t.C
	}
loop:
	for {
		select {
		case <-reap:
			s.reap()
		case <-ctx.Done():
			break loop
		case <-ended:
			s.log.Warn("MCP server disconnected", c.exit()...)
			break loop
		case <-procDone:
			s.log.Warn("MCP server process exited", c.exit()...)
			break loop
		case <-s.relist:
			id := s.gen.start()
			lctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
			if err := s.list(lctx, c.sess); err != nil {
				s.log.Warn("re-listing tools after list_changed failed; keeping the previous list", zap.Error(err))
			}
			cancel()
			s.gen.end(id)
		}
	}
	s.mu.Lock()
	s.sess = nil
	s.mu.Unlock()
	s.m.metrics.up.WithLabelValues(s.cfg.Name).Set(0)
	c.close()
}

// maxTools bounds how many tools one server may list: a server that
// pages forever cannot hold toold's start.
const maxTools = 1000

// list reads every page of the server's tools and serves them. A tool whose
// name or schema cannot be served is skipped with a warning naming it.
func (s *server) list(ctx context.Context, sess *mcp.ClientSession) error {
	var ts []*tool
	var defs []Definition
	n := 0
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if n++; n > maxTools {
			return fmt.Errorf("tools/list: more than %d tools", maxTools)
		}
		if !s.cfg.Tools.Allows(t.Name) {
			continue
		}
		pt, err := newTool(s, t)
		var def Definition
		if err == nil {
			def, err = definition(t)
		}
		if err != nil {
			s.log.Warn("skipping an upstream tool", zap.String("tool", t.Name), zap.Error(err))
			continue
		}
		ts, defs = append(ts, pt), append(defs, def)
	}
	served, held, err := s.admit(ctx, ts, defs)
	if err != nil {
		return err
	}
	var refused []error // one error a tool the registry refused
	if held != nil {
		refused = s.m.opts.SetToolsHolding(s.cfg.Name, served, held)
		for name := range held {
			s.log.Warn("holding back an upstream tool until an admin accepts it (GET /tools/changes)", zap.String("tool", name), zap.String("why", held[name]))
		}
	} else {
		refused = s.m.opts.SetTools(s.cfg.Name, served)
	}
	for _, err := range refused {
		s.log.Warn("skipping an upstream tool", zap.Error(err))
	}
	s.m.metrics.tools.WithLabelValues(s.cfg.Name).Set(float64(len(served) - len(refused)))
	return nil
}

func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	s.mu.Lock()
	sink := s.progress[tok]
	s.mu.Unlock()
	if sink == nil {
		return
	}
	msg := req.Params.Message
	if msg == "" {
		msg = fmt.Sprintf("progress %g", req.Params.Progress)
		if req.Params.Total > 0 {
			msg += fmt.Sprintf(" of %g", req.Params.Total)
		}
	}
	sink.notify(req.Params.Progress, req.Params.Total, msg+"\n")
}

// withHeaders returns a client that adds the server's headers to every
// request. The headers may hold credentials: they are never logged.
func withHeaders(c *http.Client, h map[string]string) *http.Client {
	if len(h) == 0 {
		return c
	}
	cp := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = headerTransport{base: base, h: h}
	return &cp
}

type headerTransport struct {
	base http.RoundTripper
	h    map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, k := range slices.Sorted(maps.Keys(t.h)) {
		r.Header.Set(k, t.h[k])
	}
	return t.base.RoundTrip(r)
}
