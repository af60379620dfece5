package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/confirm"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/mcpserver"
	"github.com/toold/toold/internal/metrics"
	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/notify"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/server"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/await"
	"github.com/toold/toold/internal/tools/catalog"
	"github.com/toold/toold/internal/tools/command"
	"github.com/toold/toold/internal/tools/consult"
	"github.com/toold/toold/internal/tools/diag"
	"github.com/toold/toold/internal/tools/fs"
	"github.com/toold/toold/internal/tools/httpapi"
	"github.com/toold/toold/internal/tools/upstream"
	"github.com/toold/toold/internal/tracing"
)

// defaultDrainGrace is how long accepted calls may finish after SIGTERM.
const defaultDrainGrace = 30 * time.Second

// errDraining is the cause given to calls cancelled when the grace period
// ends: their envelopes say toold shut down, not that the caller left.
var errDraining = &tools.Error{Kind: tools.OverloadError, Code: tools.CodeDraining, RetryAfter: time.Second,
	Message:    "toold shut down before the call finished",
	Suggestion: "retry against another replica, or after toold restarts"}

// app is one wired toold: everything build made, ready to serve.
type app struct {
	cfg      *config.Config
	log      *zap.Logger
	reg      *registry.Live
	launcher *launch.Launcher
	san      *sanitize.Sanitizer
	upstream *upstream.Manager
	mcp      *mcpserver.Server
	srv      *server.Server
	api      *http.Server
	admin    *http.Server
	metrics  *prometheus.Registry
	// conns caps the API listener's connections (nil: no cap).
	conns       *server.ConnLimit
	grace       time.Duration
	insecure    bool
	cancelCalls context.CancelCauseFunc
	closers     []func() error
	// store and exec exist when the state store is on (not for
	// -check-config, which starts nothing).
	store *state.Store
	exec  *executions.Service
	// tracing is nil when tracing is off.
	tracing *tracing.Tracing
	credentialState
	// toolReg, when set, takes the tools' metrics instead of metrics (a
	// reload's generation: see pendingMetrics).
	toolReg prometheus.Registerer
	// reload applies reloads (reload.go); set by run once built.
	reload   *reloader
	disp     *dispatch.Dispatcher
	keyring  *auth.Keyring
	auditRec *events.Recorder
	lim      *limits.Limiter
}

// toolRegisterer is where the tools' metrics go.
func (a *app) toolRegisterer() prometheus.Registerer {
	if a.toolReg != nil {
		return a.toolReg
	}
	return a.metrics
}

// build wires every package from the configuration; it is the only place
// that knows them all. It listens on nothing, so -check-config uses it too
// (withState false: the store is neither started nor reached).
func build(cfg *config.Config, log *zap.Logger, env func(string) (string, bool), withState bool) (*app, error) {
	a := &app{cfg: cfg, log: log, grace: cmp.Or(cfg.Server.DrainGrace, defaultDrainGrace), metrics: prometheus.NewRegistry()}
	ok := false
	defer func() {
		if !ok {
			a.close()
		}
	}()
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoCollector())
	if err := a.startTracing(env); err != nil {
		return nil, err
	}
	// Before the tools: the consultation tools redact with it what leaves
	// toold without passing the pipeline (answers sent for synthesis).
	san, err := sanitize.New(cfg.Sanitize, a.metrics)
	if err != nil {
		return nil, err
	}
	a.san = san
	if err := a.credentialsSetup(); err != nil {
		return nil, err
	}
	ts, err := a.tools()
	if err != nil {
		return nil, err
	}
	regOpts := registryOptions(cfg)
	first, err := registry.New(regOpts, ts...)
	if err != nil {
		return nil, err
	}
	a.reg = registry.NewLive(first, regOpts)
	eng, err := loadPolicy(cfg)
	if err != nil {
		return nil, err
	}
	sets, err := toolsets(cfg)
	if err != nil {
		return nil, err
	}
	keyring, err := auth.NewKeyring(a.bindToolsets(keys(cfg), sets))
	if err != nil {
		return nil, err
	}
	verifier, err := oauth.New(oauth.Options{Issuers: cfg.Auth.OAuth, Registerer: a.metrics, Logger: log.Named("oauth")})
	if err != nil {
		return nil, config.SectionError("auth.oauth", err)
	}
	lim := limits.New(limits.Options{Registerer: a.metrics, GlobalCap: cfg.Server.GlobalCap,
		ServerCaps: upstream.ServerCaps(cfg.MCP.Servers)})
	lim.Register(first.Entries()...)
	toolMetrics := metrics.New(a.metrics, first, knownLimits(cfg, regOpts)...)
	a.reg.Subscribe(func(r *registry.Registry) {
		lim.Register(r.Entries()...)
		toolMetrics.Register(r)
	})
	observers := []dispatch.Observer{toolMetrics}
	var rec *events.Recorder
	// Without a store, the gate's key and memory of used tokens last as
	// long as this process; with one, the store remembers for every
	// replica (see internal/confirm).
	gate := confirm.New([]byte(cfg.Server.ConfirmSecret), confirm.DefaultTTL)
	if withState && cfg.State.Enabled {
		if rec, err = a.openState(env); err != nil {
			return nil, err
		}
		gate = confirm.Shared([]byte(cfg.Server.ConfirmSecret), confirm.DefaultTTL, a.store.SpentTokens())
		// A console sign-out is recorded where every replica reads it.
		verifier.UseRevocations(a.store.RevokedSessions())
		// and a session's refresh token (sealed), where every replica
		// refreshes it.
		verifier.UseSessionTokens(a.store.SessionTokens())
		observers = append(observers, rec)
	}
	if withState {
		if err := a.openVault(rec); err != nil {
			return nil, err
		}
	}
	// After the store: the pins of hosted tools are kept there.
	keeper, err := a.startUpstream()
	if err != nil {
		return nil, err
	}
	if err := a.checkPublicURL(); err != nil {
		return nil, err
	}
	do := dispatch.Options{Registry: a.reg, Limiter: lim, Logger: log,
		Confirm:   gate,
		Sanitizer: san, MaxDepth: cfg.Server.MaxJSONDepth,
		Observers: observers, Tracer: a.tracing.Tracer(), TracePayloads: tracePayloads(cfg),
		Policy: eng, Toolsets: sets, MaxResultBytes: maxResultBytes(cfg)}
	arts := artifactsOf(a.store)
	if arts != nil {
		do.Artifacts = arts
	}
	if p := limits.NewPrincipals(cfg.Auth.Limits, a.metrics); p != nil {
		do.Principals = p
		log.Info("each principal is bounded on its own", zap.Stringer("limits", p))
	}
	disp, err := dispatch.New(do)
	if err != nil {
		return nil, err
	}
	a.disp, a.keyring, a.auditRec, a.lim = disp, keyring, rec, lim
	onApproval, err := a.approvalWebhook()
	if err != nil {
		return nil, err
	}
	ec := cfg.Executions
	a.exec, err = executions.New(executions.Options{Store: a.store, Dispatcher: disp, Recorder: rec, Workers: ec.Workers,
		Heartbeat: ec.Heartbeat, MaxAttempts: ec.MaxAttempts, BatchMax: ec.BatchMax, MaxWait: ec.MaxWait,
		IdempotencyWait: ec.IdempotencyWait, Allows: keyring.Allows, AllowsToken: verifier.AllowsToken, Logger: log.Named("executions"), Registerer: a.metrics,
		Tracer: a.tracing.Tracer(), OnApproval: onApproval})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() error { a.exec.Close(); return nil })
	// One reader for REST and /mcp: its byte budget bounds every body held.
	bodies := reqbody.New(reqbody.Options{MaxBytes: cfg.Server.MaxBodyBytes, Budget: cfg.Server.BodyBudgetBytes,
		Timeout: cfg.Server.BodyReadTimeout, Registerer: a.metrics})
	mo := mcpserver.Options{Dispatcher: disp, Registry: a.reg, Logger: log.Named("mcp"),
		Version: versionString(), MaxBodyBytes: cfg.Server.MaxBodyBytes, Bodies: bodies, Executions: a.exec, Tracer: a.tracing.Tracer(),
		Toolsets: sets, StdioPrincipal: keyring.Principal(cfg.MCP.StdioKey), StdioDrain: a.grace,
		SessionSecret: []byte(cfg.Server.ConfirmSecret)}
	if arts != nil {
		mo.Artifacts = arts
	}
	a.mcp = mcpserver.New(mo)
	var mcpHandler http.Handler
	if cfg.MCP.Serves() {
		mcpHandler = a.mcp.Handler()
	}
	a.srv, err = server.New(server.Options{Dispatcher: disp, Keyring: keyring, OAuth: verifier, Logger: log, OpenAPI: api.OpenAPI, Version: versionString(),
		AllowedOrigins: cfg.Server.AllowedOrigins, AllowedHosts: cfg.Server.AllowedHosts,
		MaxBodyBytes: cfg.Server.MaxBodyBytes, Bodies: bodies, WriteTimeout: cmp.Or(cfg.Server.WriteTimeout, 30*time.Second), Registerer: a.metrics, MCP: mcpHandler, Ready: a.upstream.Ready,
		StuckCalls: lim.StuckCalls, Measured: toolMetrics.Measured, Executions: a.exec, Store: a.store, Recorder: rec,
		// Without keys or issuers there is one identity, every local
		// process's: the agent and the person approving are told apart
		// only by credentials, so the anonymous caller decides only when
		// the operator says so.
		SelfApproval: cfg.Approvals.SelfApproval, Tracer: a.tracing.Tracer(),
		Toolsets: sets, MCPToolsets: a.mcpToolsets(sets), Pinned: cfg.Search.PinnedPatterns(), Pins: keeper, Relist: a.relist(),
		AnonymousWithheld: a.anonymousWithheld, Credentials: a.vault, Delegate: a.delegate, Reload: a.reloadRequest})
	if err != nil {
		return nil, err
	}
	a.insecure = !keyring.Enabled() && verifier == nil && !config.Loopback(cfg.Listen)
	if verifier != nil && withState {
		verifier.Warm(context.Background())
	}
	a.api, a.admin = a.httpServers()
	ok = true
	return a, nil
}

// approvalWebhook starts the webhook of approvals.webhook_url, through
// an outbound guard of its own policy; nil when none is configured. A URL
// the guard would refuse whatever the address (plain http not allowed,
// credentials in it) is a configuration error, told at start.
func (a *app) approvalWebhook() (func(executions.PendingApproval), error) {
	ac := a.cfg.Approvals
	if ac.WebhookURL == "" {
		return nil, nil
	}
	fail := func(path string, err error) error {
		return &config.Error{Problems: []config.Problem{{Path: path, Message: err.Error()}}}
	}
	g, err := netguard.New(netguard.Policy{Allow: ac.WebhookAllow, AllowHTTP: ac.WebhookAllowHTTP})
	if err != nil {
		return nil, fail("approvals.webhook_allow", err)
	}
	u, err := url.Parse(ac.WebhookURL)
	if err == nil {
		err = g.CheckURL(u)
	}
	if err != nil {
		return nil, fail("approvals.webhook_url", errors.New(notify.WebhookError(err, ac.WebhookURL)))
	}
	wh, err := notify.NewWebhook(notify.WebhookOptions{URL: ac.WebhookURL, Guard: g, Logger: a.log.Named("webhook")})
	if err != nil {
		return nil, fail("approvals.webhook_url", err)
	}
	a.closers = append(a.closers, func() error { wh.Close(); return nil })
	return wh.Notify, nil
}

// openState opens the store the configuration names, and the recorder of
// events and the audit log, signed and checkpointed, that writes to it.
func (a *app) openState(lookupEnv func(string) (string, bool)) (*events.Recorder, error) {
	cfg, log := a.cfg, a.log
	audit := cfg.State.Audit.Enabled
	var signer *events.Signer
	var from string
	dir, err := stateDir(cfg)
	if err != nil {
		return nil, err
	}
	// A missing or malformed key fails here, before the store is reached;
	// only a key toold makes itself waits for the store's directory.
	generate := false
	if audit {
		signer, from, err = auditSigner(cfg, dir, lookupEnv, false)
		generate = errors.Is(err, os.ErrNotExist) && from == filepath.Join(dir, generatedKey)
		if err != nil && !generate {
			return nil, err
		}
	}
	if a.store, err = openState(cfg, log, a.metrics, false); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.store.Close)
	if u := a.store.ClientURL(); u != "" {
		log.Info("the embedded state store accepts NATS clients with credentials", zap.String("url", u))
	}
	if generate {
		if signer, from, err = auditSigner(cfg, dir, lookupEnv, true); err != nil {
			return nil, err
		}
	}
	eo := events.Options{Store: a.store, Audit: audit, Signer: signer, Logger: log.Named("events"), Registerer: a.metrics}
	if cfg.State.Audit.RedactArguments {
		eo.RedactArguments = a.san.RedactJSON
	}
	rec := events.NewRecorder(eo)
	if !audit {
		go rec.Run()
		a.closers = append(a.closers, func() error { rec.Close(); return nil })
		return rec, nil
	}
	log.Info("the audit log is signed", zap.String("key_id", signer.KeyID()),
		zap.String("public_key", events.MarshalPublicKey(signer.PublicKey())), zap.String("from", from))
	cp, err := events.NewCheckpointer(events.CheckpointOptions{Head: rec.AuditHead, Interval: cfg.State.Audit.CheckpointInterval,
		File: cfg.State.Audit.CheckpointFile, Logger: log.Named("audit"), Registerer: a.metrics})
	if err != nil {
		return nil, err
	}
	go rec.Run()
	go cp.Run()
	// The last checkpoint after the last records.
	a.closers = append(a.closers, func() error { rec.Close(); cp.Close(); return nil })
	return rec, nil
}

// stateDir is the embedded store's directory: state.dir, or the
// workspace's own directory under the user's state directory; empty for an
// external store.
func stateDir(cfg *config.Config) (string, error) {
	if cfg.State.Dir != "" || cfg.State.NATS.URL != "" {
		return cfg.State.Dir, nil
	}
	return state.DefaultDir(os.LookupEnv, cfg.Workspace)
}

// noteSharedStore says where the store of an older toold is, when one is
// in the directory every workspace used to share: its executions and audit
// log stay there, and -state-dir takes this toold back to them.
func noteSharedStore(dir string, log *zap.Logger) {
	shared, err := state.SharedDir(os.LookupEnv)
	if err != nil || shared == dir {
		return
	}
	if _, err := os.Stat(filepath.Join(shared, "jetstream")); err == nil {
		log.Info("each workspace now has its own state directory; an older toold's store (executions, audit log) stays in the shared one: start with -state-dir to use it",
			zap.String("state_dir", dir), zap.String("shared_state_dir", shared))
	}
}

// openState opens the store the configuration names: an external NATS, or
// the embedded server in state.dir (the user's state directory by default).
// existing opens it as it is, creating and changing nothing (a command
// that only reads it).
func openState(cfg *config.Config, log *zap.Logger, reg prometheus.Registerer, existing bool) (*state.Store, error) {
	sc := cfg.State
	dir, err := stateDir(cfg)
	if err != nil {
		return nil, err
	}
	if sc.Dir == "" && sc.NATS.URL == "" {
		noteSharedStore(dir, log)
	}
	name := sc.Replica
	if name == "" {
		host, _ := os.Hostname()
		var b [2]byte
		_, _ = rand.Read(b[:])
		name = cmp.Or(host, "toold") + "-" + hex.EncodeToString(b[:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := sc.NATS
	return state.Open(ctx, state.Options{URL: n.URL, Credentials: n.Credentials, User: n.User,
		Password: n.Password, Token: n.Token, NKeySeedFile: n.NKeySeedFile,
		TLS: state.TLS{CAFile: n.TLS.CAFile, CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile},
		Dir: dir, Listen: n.Listen, MaxStore: sc.MaxStoreBytes,
		Replicas: n.Replicas, Retention: sc.Retention, IdempotencyTTL: sc.IdempotencyTTL,
		EventsMaxAge: sc.Events.MaxAge, EventsMaxBytes: sc.Events.MaxBytes, AuditMaxAge: sc.Audit.MaxAge,
		AuditMaxBytes: sc.Audit.MaxBytes, ArtifactsRetention: sc.Artifacts.Retention, ArtifactsMaxBytes: sc.Artifacts.MaxBytes,
		Name: name, Logger: log.Named("state"), Registerer: reg, Existing: existing})
}

// artifactsOf is the store's artifacts; nil without a store or without
// room for them in it (a nil *state.Artifacts in an interface would not
// be nil).
func artifactsOf(st *state.Store) *state.Artifacts {
	if st == nil {
		return nil
	}
	return st.Artifacts()
}

// relist is the upstream manager's RelistNow, or nil without hosted
// servers.
func (a *app) relist() func(context.Context, string) error {
	if a.upstream == nil {
		return nil
	}
	return a.upstream.RelistNow
}

// maxResultBytes is the result budget of tools that declare none:
// server.max_result_bytes, tools.DefaultMaxResultBytes when absent, and
// none for 0.
func maxResultBytes(cfg *config.Config) int64 {
	if cfg.Server.MaxResultBytes == nil {
		return tools.DefaultMaxResultBytes
	}
	return tools.ResultBudget(cfg.Server.MaxResultBytes)
}

// candidate is a tool toold can serve, with whether it is on unless the
// tools section says otherwise.
type candidate struct {
	tool tools.Tool
	on   bool
}

// tools builds every tool toold can serve, keeps those the configuration
// enables, and refuses configuration for tools that do not exist.
func (a *app) tools() ([]tools.Tool, error) {
	all, unbuilt, err := a.candidates()
	if all == nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, name := range unbuilt { // declared by a family that failed: no unknown name either
		known[name] = true
	}
	var out []tools.Tool
	for _, c := range all {
		name := c.tool.Spec().Name
		known[name] = true
		if a.cfg.Enabled(name, c.on) {
			out = append(out, c.tool)
		}
	}
	probs := &config.Error{}
	for name := range a.cfg.Tools {
		if !known[name] {
			probs.Problems = append(probs.Problems, config.Problem{Path: "tools." + name,
				Message: "no such tool (tools: " + strings.Join(slices.Sorted(maps.Keys(known)), ", ") + ")"})
		}
	}
	if len(probs.Problems) > 0 {
		err = errors.Join(err, probs)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// candidates are the file tools (the read-only ones on by default), the
// diagnostics (off), and the command tools of the commands section, the
// HTTP tools of the http section and the consultation tools of the consult
// section (on: an operator who declares one wants it). When a family
// fails to build, the others still are, and the names its configuration
// declares are returned as unbuilt, so that tools() can still tell an
// unknown name in tools: from one whose family failed: -check-config lists
// every problem in one pass. Any error means toold cannot start.
func (a *app) candidates() (all []candidate, unbuilt []string, err error) {
	fsc := a.cfg.FS
	if err := fs.CheckProtected(executedFiles(a.cfg.Commands)); err != nil {
		return nil, nil, &config.Error{Problems: []config.Problem{{Path: "commands.tools", Message: err.Error()}}}
	}
	ws, err := fs.New(a.cfg.Workspace, fs.Options{MaxReadBytes: fsc.MaxReadBytes, MaxTotalReadBytes: fsc.MaxTotalReadBytes,
		MaxFileBytes: fsc.MaxFileBytes, MaxEntries: fsc.MaxEntries, MaxMatches: fsc.MaxMatches, MaxWriteBytes: fsc.MaxWriteBytes,
		Protected: executedFiles(a.cfg.Commands), AllowProtected: fsc.AllowProtected,
		Redactor: func() fs.LineRedactor { return a.san.NewLineRedactor("grep") }})
	if err != nil {
		return nil, nil, &config.Error{Problems: []config.Problem{{Path: "workspace", Message: err.Error()}}}
	}
	a.closers = append(a.closers, ws.Close)
	readOnly := ws.ReadOnlyTools()
	for _, t := range ws.Tools() {
		all = append(all, candidate{t, slices.Contains(readOnly, t)})
	}
	all = append(all, candidate{diag.Echo(), false}, candidate{diag.Sleep(), false}, candidate{catalog.Tool(a.searchTools), true})
	for _, t := range await.Tools(await.Options{MaxDepth: a.cfg.Delegate.MaxDepth}) {
		all = append(all, candidate{t, false}) // they need the state store, and a caller that can answer
	}
	// Each family's problems are reported, not only the first family's:
	// -check-config lists them all in one pass. The consultation tools need
	// the command and HTTP tools, so they are built only when both were.
	var errs []error
	cs, err := a.commandTools()
	if err != nil {
		errs = append(errs, &config.Error{Problems: []config.Problem{{Path: "commands", Message: err.Error()}}})
		unbuilt = append(unbuilt, command.ExecuteCommandName)
		for _, t := range a.cfg.Commands.Tools {
			unbuilt = append(unbuilt, t.Name)
		}
	} else {
		for _, line := range cs.Describe() {
			a.log.Info("command tool", zap.String("containment", line))
		}
		for _, t := range cs.Tools() {
			all = append(all, candidate{t, true})
		}
	}
	ho := httpapi.Options{Registerer: a.toolRegisterer(), Delegate: a.delegate}
	if a.vaults != nil {
		ho.Vault = a.vaults
	}
	hs, err := httpapi.New(a.cfg.HTTP, ho)
	if err != nil {
		errs = append(errs, config.SectionError("http", err))
		for _, t := range a.cfg.HTTP.Tools {
			unbuilt = append(unbuilt, t.Name)
		}
	} else {
		a.closers = append(a.closers, hs.Close)
		for _, t := range hs.Tools() {
			all = append(all, candidate{t, true})
		}
	}
	if errs != nil {
		return all, append(unbuilt, consult.ToolNames...), errors.Join(errs...)
	}
	co, err := consult.New(a.cfg.Consult, consult.Options{Launcher: a.launcher, HTTP: hs, Registerer: a.toolRegisterer(),
		Redact: func(s string) string { return a.san.RedactString(consultRedactor, s) }})
	if err != nil {
		return all, consult.ToolNames, config.SectionError("consult", err)
	}
	// Only now has every tool kind reaching APIs through the HTTP tools'
	// machinery (the consultation providers) declared its hosts.
	if err := hs.CheckHosts(); err != nil {
		return all, unbuilt, config.SectionError("http", err)
	}
	for _, line := range co.Describe() {
		a.log.Info("consult provider", zap.String("provider", line))
	}
	for _, t := range co.Tools() {
		all = append(all, candidate{t, true})
	}
	return all, unbuilt, nil
}

// commandTools builds the launcher every program toold starts goes
// through (command tools, stdio MCP servers, consultation CLIs) and the
// command tools on it.
func (a *app) commandTools() (*command.Set, error) {
	lc := a.cfg.Commands.Config
	// The egress proxies of allow-list runs count per tool on toold's
	// registry, and inject ${user:NAME} from the caller's own vault
	// (refused without credentials.key).
	lc.Egress = egress.Options{Metrics: egress.NewMetrics(a.metrics)}
	if a.vaults != nil {
		lc.Egress.Vault = a.vaults
	}
	l, err := launch.New(lc, a.cfg.Workspace)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, l.Close)
	a.launcher = l
	return command.New(a.cfg.Commands, l, a.log.Named("command"))
}

// executedFiles are the files the command tools execute (what they say,
// and what their programs read by themselves): the file tools refuse to
// write them (fs.Protected).
func executedFiles(c command.Config) []fs.Protected {
	var out []fs.Protected
	for _, e := range c.Executed() {
		out = append(out, fs.Protected{Pattern: e.Glob, By: e.By})
	}
	return out
}

// consultRedactor names the policy a synthesis prompt is redacted with:
// the consultation tools', which send their arguments to third parties.
const consultRedactor = "consult_many"

// registryOptions passes the configured category defaults and the
// overrides of enabled tools.
func registryOptions(cfg *config.Config) registry.Options {
	o := registry.Options{Defaults: map[tools.Category]tools.Limits{}, Overrides: map[string]registry.Override{}}
	for name, l := range cfg.Categories {
		o.Defaults[tools.Category(name)] = l.Limits()
	}
	for name, t := range cfg.Tools {
		if t.Enabled != nil && !*t.Enabled {
			continue
		}
		if t.Description != "" || !t.Limits.IsZero() || t.Fallback != nil || t.Confirmation != "" || t.MaxResultBytes != nil {
			o.Overrides[name] = registry.Override{Description: t.Description, Limits: t.Limits.Limits(), Fallback: t.Fallback,
				Confirmation: t.Confirmation, MaxResultBytes: tools.ResultBudget(t.MaxResultBytes)}
		}
	}
	return o
}

// knownLimits are the limits the configuration gives tools that join
// while toold serves: each category's, and each upstream server's and its
// tools' (validated already; see config.checkServerLimits).
func knownLimits(cfg *config.Config, o registry.Options) []tools.Limits {
	var out []tools.Limits
	for _, c := range tools.Categories {
		l, _ := o.ResolveLimits(c, tools.Limits{})
		out = append(out, l)
	}
	for _, srv := range cfg.MCP.Servers {
		l, _ := o.ResolveLimits(tools.MCP, srv.Limits.Limits())
		out = append(out, l)
		for _, tl := range srv.ToolLimits {
			l, _ := o.ResolveLimits(tools.MCP, tl.Limits().Merge(srv.Limits.Limits()))
			out = append(out, l)
		}
	}
	return out
}

func keys(cfg *config.Config) []auth.Key {
	var ks []auth.Key
	for _, k := range cfg.Auth.Keys {
		var roles []auth.Role
		for _, r := range k.Roles {
			roles = append(roles, auth.Role(r))
		}
		ks = append(ks, auth.Key{Name: k.Name, SHA256: k.SHA256, Tools: k.Tools, Roles: roles})
	}
	return ks
}

// httpServers builds the API and admin servers with explicit timeouts. A
// request's context descends from a context drain can cancel with a cause.
func (a *app) httpServers() (*http.Server, *http.Server) {
	base, cancel := context.WithCancelCause(context.Background())
	a.cancelCalls = cancel
	sc := a.cfg.Server
	apiSrv := &http.Server{
		Handler:           a.srv.Handler(),
		ReadHeaderTimeout: cmp.Or(sc.ReadHeaderTimeout, 5*time.Second),
		ReadTimeout:       cmp.Or(sc.ReadTimeout, 30*time.Second),
		// No WriteTimeout: it would bound a whole response, cutting every
		// stream, long poll and long call at one fixed age. The server
		// bounds each write instead (server.Options.WriteTimeout).
		IdleTimeout:    cmp.Or(sc.IdleTimeout, 2*time.Minute),
		MaxHeaderBytes: cmp.Or(sc.MaxHeaderBytes, 64<<10),
		BaseContext:    func(net.Listener) context.Context { return base },
		ErrorLog:       zap.NewStdLog(a.log.Named("http")),
	}
	if n := sc.MaxConnections; n > 0 {
		a.conns = server.NewConnLimit(n, a.metrics)
		apiSrv.ConnState = a.conns.ConnState
	}
	if a.cfg.AdminListen == "" {
		return apiSrv, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{Registry: a.metrics,
		// OpenMetrics when the scraper asks for it: the format that carries
		// the histograms' exemplars (trace ids, with tracing on).
		EnableOpenMetrics: true}))
	if a.pprof() {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// The API's Origin and Host checks: a page whose name was rebound to
	// this machine must not read the metrics or profiles.
	adminSrv := &http.Server{Handler: a.srv.Admin(mux), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: zap.NewStdLog(a.log.Named("admin"))}
	return apiSrv, adminSrv
}

// pprof reports whether /debug/pprof is served: only when asked for.
func (a *app) pprof() bool { return a.cfg.Server.Pprof != nil && *a.cfg.Server.Pprof }

func (a *app) close() {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	if err := errors.Join(errs...); err != nil && a.log != nil {
		a.log.Warn("closing tools", zap.Error(err))
	}
}
