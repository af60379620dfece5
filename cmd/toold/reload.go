package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools/upstream"
)

// A reload (SIGHUP, POST /admin/reload, -watch, toold reload) reads the
// configuration file again, builds everything that may change while toold
// serves — toold's own tools, the sanitizer, the policy, the keys, the
// per-principal bounds — and only when all of it built swaps it in: the
// registry first (Live.Rebuild), then the dispatcher's stages
// (dispatch.Swap), the keys and the metrics. A file that does not parse,
// validate or build changes nothing. Hosted MCP servers (mcp.servers) are
// applied by upstream.Manager.Apply: an unchanged one keeps its process
// and sessions. A setting that cannot change while toold serves (listen
// addresses, the state store and its audit key, ...) refuses the reload,
// naming the keys, with restart_needed. Reloads are serialized.

// liveSections are the top-level configuration keys a reload applies.
// Every other key must be unchanged, or the reload is refused.
var liveSections = []string{"tools", "categories", "fs", "commands", "sanitize", "http", "consult", "policy"}

// liveSub are the keys under a top-level key a reload applies.
var liveSub = map[string][]string{"auth": {"keys", "limits"}, "mcp": {"servers"}}

// reloader applies reloads to a running app; safe for concurrent use.
type reloader struct {
	mu      sync.Mutex
	a       *app
	path    string // the configuration file; "" when toold runs on defaults
	watch   bool   // -watch: reload when the file changes
	load    func() (*config.Config, error)
	cur     *config.Config
	hash    string
	results *prometheus.CounterVec
	disp    *dispatch.Dispatcher
	keyring *auth.Keyring
	rec     *events.Recorder
	// closers of the generation serving now, when a reload built it (the
	// first generation's are the app's, closed at exit).
	closers []func() error
}

// ReloadResult is what a reload did.
type ReloadResult struct {
	// Hash is the SHA-256 of the configuration file now serving.
	Hash    string   `json:"hash"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Changed is false when the file was the one serving already.
	Changed bool `json:"changed"`
	// ServersStopped and ServersStarted name the hosted MCP servers the
	// reload stopped (removed or changed) and started (new or changed);
	// the others kept their processes and sessions.
	ServersStopped []string `json:"servers_stopped,omitempty"`
	ServersStarted []string `json:"servers_started,omitempty"`
}

// errRestartNeeded marks a reload refused because a setting changed that
// only a restart applies.
type restartNeeded struct{ keys []string }

func (e *restartNeeded) Error() string {
	return fmt.Sprintf("a restart is needed to change %s; the configuration serving is unchanged", strings.Join(e.keys, ", "))
}

func newReloader(a *app, path string, load func() (*config.Config, error), disp *dispatch.Dispatcher, kr *auth.Keyring, rec *events.Recorder) *reloader {
	r := &reloader{a: a, path: path, load: load, cur: a.cfg, disp: disp, keyring: kr, rec: rec,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toold_config_reloads_total",
			Help: "Configuration reloads, by result: ok, or error (the file was refused and the old configuration kept serving)."},
			[]string{"result"})}
	r.results.WithLabelValues("ok")
	r.results.WithLabelValues("error")
	a.metrics.MustRegister(r.results)
	if path != "" {
		if data, err := os.ReadFile(path); err == nil {
			r.hash = fileHash(data)
		}
	}
	return r
}

func fileHash(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Reload reads the file and applies it, or refuses it. by is who asked
// (nil for a signal, a file change or a request from another replica);
// caller and requestID name them in the audit record.
func (r *reloader) Reload(ctx context.Context, via string, by *auth.Identity, caller, requestID string) (ReloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := r.reload()
	log := r.a.log.With(zap.String("via", via))
	if err != nil {
		r.results.WithLabelValues("error").Inc()
		log.Error("the configuration was not reloaded; the old one keeps serving", zap.String("config", r.path), zap.Error(err))
		return res, err
	}
	r.results.WithLabelValues("ok").Inc()
	log.Info("the configuration was reloaded", zap.String("config", r.path), zap.String("hash", res.Hash),
		zap.Strings("added", res.Added), zap.Strings("removed", res.Removed), zap.Bool("changed", res.Changed))
	if r.rec != nil {
		r.rec.AdminBy(by, caller, "reload_config", res.Hash, requestID)
	}
	return res, nil
}

func (r *reloader) reload() (ReloadResult, error) {
	if r.path == "" {
		return ReloadResult{}, &config.Error{Problems: []config.Problem{{Path: "-config",
			Message: "toold runs on its built-in defaults, with no configuration file to read again"}}}
	}
	data, err := os.ReadFile(r.path)
	if err != nil {
		return ReloadResult{}, err
	}
	hash := fileHash(data)
	next, err := r.load()
	if err != nil {
		return ReloadResult{Hash: hash}, err
	}
	if keys := fixedChanges(r.cur, next); len(keys) > 0 {
		return ReloadResult{Hash: hash}, &restartNeeded{keys: keys}
	}
	g, err := r.a.buildGeneration(next)
	if err != nil {
		return ReloadResult{Hash: hash}, err
	}
	// The hosted servers first: their declarations may still be refused,
	// and nothing has changed yet. Unchanged servers keep running.
	var stopped, started []string
	if !reflect.DeepEqual(r.cur.MCP.Servers, next.MCP.Servers) {
		if stopped, started, err = r.a.upstream.Apply(next.MCP.Servers); err != nil {
			g.close()
			return ReloadResult{Hash: hash}, &config.Error{Problems: []config.Problem{{Path: "mcp.servers", Message: err.Error()}}}
		}
		r.a.lim.SetServerCaps(upstream.ServerCaps(next.MCP.Servers))
	}
	before := r.a.reg.Load()
	if errs := r.a.reg.Rebuild(g.first, g.regOpts); len(errs) > 0 {
		r.a.log.Warn("hosted tools dropped by the reload", zap.Error(errors.Join(errs...)))
	}
	st := r.disp.Stages() // toolsets and the result budget stay
	st.Sanitizer, st.Principals, st.Policy, st.TracePayloads = g.san, g.principals, g.policy, tracePayloads(next)
	unused := r.disp.Swap(st)
	r.keyring.Replace(g.keyring)
	g.metrics.commit(r.a.metrics)
	// What only the replaced generation used goes once no call holds it.
	if old := r.closers; len(old) > 0 {
		go func() {
			<-unused
			for _, c := range old {
				_ = c()
			}
		}()
	}
	r.closers = g.closers
	r.cur = next
	res := ReloadResult{Hash: hash, Changed: hash != r.hash, ServersStopped: stopped, ServersStarted: started}
	res.Added, res.Removed = diffTools(before, r.a.reg.Load())
	r.hash = hash
	return res, nil
}

// diffTools names toold's own tools in after and not before, and the reverse.
func diffTools(before, after *registry.Registry) (added, removed []string) {
	names := func(reg *registry.Registry) map[string]bool {
		m := map[string]bool{}
		for _, e := range reg.Entries() {
			m[e.Spec.Name] = true
		}
		return m
	}
	b, a := names(before), names(after)
	for n := range a {
		if !b[n] {
			added = append(added, n)
		}
	}
	for n := range b {
		if !a[n] {
			removed = append(removed, n)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// fixedChanges names the keys that differ between cur and next and that
// only a restart applies: everything but liveSections and liveAuth,
// compared one level under the top so the message names e.g. state.audit.
func fixedChanges(cur, next *config.Config) []string {
	var out []string
	cv, nv := reflect.ValueOf(cur).Elem(), reflect.ValueOf(next).Elem()
	for i := range cv.NumField() {
		f := cv.Type().Field(i)
		name := yamlName(f)
		if slices.Contains(liveSections, name) || name == "" || name == "-" {
			continue
		}
		out = append(out, diffField(name, f.Type, cv.Field(i), nv.Field(i), liveSub[name])...)
	}
	return out
}

// diffField compares one field; a struct is compared field by field (one
// level), skipping the live keys under it.
func diffField(name string, t reflect.Type, a, b reflect.Value, live []string) []string {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return nil
	}
	if t.Kind() != reflect.Struct {
		return []string{name}
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		sub := yamlName(f)
		if slices.Contains(live, sub) {
			continue
		}
		if sub == "" || sub == "-" {
			sub = strings.ToLower(f.Name)
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, name+"."+sub)
		}
	}
	return out
}

func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return tag
}

func (g *generation) close() {
	for _, c := range g.closers {
		_ = c()
	}
}

// generation is what a reload built, not yet serving.
type generation struct {
	first      *registry.Registry
	regOpts    registry.Options
	san        *sanitize.Sanitizer
	policy     *policy.Engine
	principals dispatch.PrincipalLimiter
	keyring    *auth.Keyring
	metrics    *pendingMetrics
	closers    []func() error
}

// buildGeneration builds what next changes, on an app of its own that
// shares the live registry (the search tool lists the tools serving) and
// the logger; its metrics wait in pendingMetrics until the swap. Nothing
// of it serves until the caller swaps it in; on an error all of it is
// closed.
func (a *app) buildGeneration(next *config.Config) (_ *generation, err error) {
	pm := &pendingMetrics{}
	b := &app{cfg: next, log: a.log, reg: a.reg, metrics: prometheus.NewRegistry(), tracing: a.tracing}
	// The HTTP tools reach the same vault and OAuth connections.
	b.delegate, b.vaults = a.delegate, a.vaults
	defer func() {
		if p := recover(); p != nil { // a configuration that broke a rule some code relies on
			err = fmt.Errorf("the configuration could not be built: %v", p)
		}
		if err != nil {
			b.close()
		}
	}()
	reg := prometheus.WrapRegistererWith(nil, pm)
	g := &generation{metrics: pm}
	if g.san, err = sanitize.New(next.Sanitize, reg); err != nil {
		return nil, err
	}
	b.san, b.toolReg = g.san, reg
	ts, err := b.tools()
	if err != nil {
		return nil, err
	}
	g.regOpts = registryOptions(next)
	if g.first, err = registry.New(g.regOpts, ts...); err != nil {
		return nil, err
	}
	if g.policy, err = loadPolicy(next); err != nil {
		return nil, err
	}
	sets, err := toolsets(next)
	if err != nil {
		return nil, err
	}
	if g.keyring, err = auth.NewKeyring(b.bindToolsets(keys(next), sets)); err != nil {
		return nil, err
	}
	if p := limits.NewPrincipals(next.Auth.Limits, reg); p != nil {
		g.principals = p
	}
	g.closers = b.closers
	return g, nil
}

// pendingMetrics holds a generation's collectors until it serves: then
// each takes the place of the one of the same name (commit), so a refused
// reload never touches the metrics served. A replaced counter starts
// again from zero, which Prometheus reads as a counter reset.
type pendingMetrics struct{ cs []prometheus.Collector }

func (p *pendingMetrics) Register(c prometheus.Collector) error {
	p.cs = append(p.cs, c)
	return nil
}

func (p *pendingMetrics) MustRegister(cs ...prometheus.Collector) { p.cs = append(p.cs, cs...) }

func (p *pendingMetrics) Unregister(c prometheus.Collector) bool {
	for i, x := range p.cs {
		if x == c {
			p.cs = slices.Delete(p.cs, i, i+1)
			return true
		}
	}
	return false
}

func (p *pendingMetrics) commit(reg *prometheus.Registry) {
	for _, c := range p.cs {
		err := reg.Register(c)
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			reg.Unregister(are.ExistingCollector)
			err = reg.Register(c)
		}
		_ = err // a collector new to this registry that clashes in part: not served, as before the reload
	}
}
