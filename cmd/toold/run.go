package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/console"
)

// run is the whole program; main only turns its error into an exit code.
// Tests call it with their own arguments, environment and writers.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "audit" {
		return runAudit(ctx, args[1:], lookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "policy" {
		return runPolicy(args[1:], lookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "reload" {
		return runReload(ctx, args[1:], lookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "sandbox" {
		return runSandbox(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "credentials" {
		return runCredentials(args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, lookupEnv, stderr)
	if err != nil {
		return exitCode(2)
	}
	switch {
	case o.version:
		fmt.Fprintln(stdout, "toold", versionString())
		return nil
	case o.hashKey:
		return hashKey(stdin, stdout)
	case o.newKey:
		key := auth.NewKey()
		fmt.Fprintf(stdout, "key:    %s\nsha256: %s\n", key, auth.Hash(key))
		return nil
	case o.checkConfig != "":
		return checkConfig(o, lookupEnv, stdout, stderr)
	}
	cfg, err := loadConfig(o, lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "toold: the configuration has problems:\n%v\n", err)
		return exitCode(2)
	}
	if o.stdio {
		err := o.checkStdioWorkspace(cfg, lookupEnv)
		if err == nil {
			err = checkStdioKey(cfg)
		}
		if err != nil {
			fmt.Fprintln(stderr, "toold:", err)
			return exitCode(2)
		}
	}
	// A host may start many toold -stdio processes, each for a project:
	// they share no embedded store (its directory takes one process), and
	// use the store only where one is configured for them.
	withState := !o.stdio || cfg.State.NATS.URL != "" || cfg.State.Dir != ""
	if err := checkOwnFiles(cfg, o.config, withState); err != nil {
		fmt.Fprintln(stderr, "toold:", err)
		return exitCode(2)
	}
	cfg.Commands.Private = privatePaths(cfg, o.config, withState)
	log, flush, err := newLogger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer flush()
	logGC(log, gcTuned)
	if !withState {
		log.Info("the state store is off for -stdio: set state.dir or state.nats.url to record executions and audit")
	}
	a, err := build(cfg, log, lookupEnv, withState)
	if err != nil {
		fmt.Fprintf(stderr, "toold: cannot start:\n%v\n", err)
		if hint := secondTooldHint(err, cfg, o.stdio); hint != "" {
			fmt.Fprintln(stderr, hint)
		}
		return exitCode(2)
	}
	defer a.close()
	a.reload = newReloader(a, o.config, func() (*config.Config, error) { return reloadConfig(o, lookupEnv, withState) },
		a.disp, a.keyring, a.auditRec)
	a.reload.watch = o.watch
	if o.stdio {
		return a.serveStdio(ctx, stdin, stdout)
	}
	warnWideWorkspace(cfg, lookupEnv, stdout, log)
	return a.serve(ctx, stdout)
}

func loadConfig(o *options, lookupEnv func(string) (string, bool)) (*config.Config, error) {
	cfg := config.Default()
	if o.config != "" {
		var err error
		if cfg, err = config.Load(o.config, lookupEnv); err != nil && cfg == nil {
			return nil, err
		}
	}
	o.apply(cfg)
	return cfg, cfg.Validate()
}

// checkConfig validates a file as toold would run it: the config's own
// rules, then building every tool and the registry, without listening.
func checkConfig(o *options, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	o.config = o.checkConfig
	cfg, err := loadConfig(o, lookupEnv)
	var problems []string
	if err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	// The file's own files against the workspace it names (or -workspace
	// names): without one, the workspace is wherever toold will be run.
	if cfg != nil && (o.set["workspace"] || cfg.Workspace != config.Default().Workspace) {
		if err := checkOwnFiles(cfg, o.config, true); err != nil {
			problems = append(problems, strings.Split(err.Error(), "\n")...)
		}
	}
	// A file that parsed is built even when its settings broke rules: the
	// tools, the registry and the upstream servers have problems of their
	// own, and one pass should list them all.
	if cfg != nil {
		if err := checkBuild(cfg, lookupEnv); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !slices.Contains(problems, line) {
					problems = append(problems, line)
				}
			}
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, strings.Join(problems, "\n"))
		return exitCode(1)
	}
	fmt.Fprintf(stdout, "%s: ok\n", o.checkConfig)
	return nil
}

// checkBuild builds the app as toold would run it, without the store. A
// configuration that broke its own rules may trip code that relies on them:
// such a panic is no further problem to report.
func checkBuild(cfg *config.Config, lookupEnv func(string) (string, bool)) (err error) {
	defer func() {
		if recover() != nil {
			err = nil
		}
	}()
	a, err := build(cfg, zap.NewNop(), lookupEnv, false)
	if err == nil {
		a.close()
	}
	return err
}

// hashKey prints the SHA-256 of the key read from stdin. The key comes on
// stdin, not as an argument, so it stays out of shell history and ps.
func hashKey(stdin io.Reader, stdout io.Writer) error {
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	key := strings.TrimRight(line, "\r\n")
	if len(key) < 16 {
		return errors.New("-hash-key: give the key on stdin (at least 16 characters), e.g. printf %s \"$KEY\" | toold -hash-key")
	}
	fmt.Fprintln(stdout, auth.Hash(key))
	return nil
}

// nopWriteCloser lets the transport "close" stdout without closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// listenURL is how the start-up line shows an address.
func listenURL(addr net.Addr) string { return "http://" + addr.String() }

func absPath(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// serve runs the listeners until ctx ends, then drains.
func (a *app) serve(ctx context.Context, stdout io.Writer) error {
	ln, err := apiEndpoint.listen(a.cfg.Listen, a.cfg.AdminListen)
	if err != nil {
		return err
	}
	if a.delegate != nil && a.cfg.Server.PublicURL == "" {
		a.delegate.SetPublicURL(listenURL(ln.Addr())) // loopback: checkPublicURL refused anything else
	}
	if a.conns != nil {
		ln = a.conns.Listener(ln)
	}
	var adminLn net.Listener
	if a.cfg.AdminListen != "" {
		if adminLn, err = adminEndpoint.listen(a.cfg.AdminListen, a.cfg.Listen); err != nil {
			ln.Close()
			return err
		}
	}
	a.protectPorts(ln, adminLn)
	if err := a.exec.Start(ctx); err != nil {
		ln.Close()
		if adminLn != nil {
			adminLn.Close()
		}
		return err
	}
	a.upstream.Start()
	stopReloads, err := a.startReloads(ctx)
	if err != nil {
		ln.Close()
		if adminLn != nil {
			adminLn.Close()
		}
		return err
	}
	defer stopReloads()
	a.announce(stdout, ln, adminLn)
	errc := make(chan error, 2)
	go func() { errc <- a.api.Serve(ln) }()
	if adminLn != nil {
		go func() { errc <- a.admin.Serve(adminLn) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("server stopped: %w", err)
	case <-ctx.Done():
	}
	return a.drain()
}

// serveStdio serves MCP on stdin and stdout until the host closes stdin or
// ctx ends. stdout carries the protocol only: every log line goes to
// stderr. The admin listener runs only when asked for (-admin-listen).
func (a *app) serveStdio(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	// With a store, this process's workers run the executions it parks
	// and resumes (and their wait timers); without one they are idle.
	if a.cfg.AdminListen != "" {
		adminLn, err := adminEndpoint.listen(a.cfg.AdminListen, a.cfg.Listen)
		if err != nil {
			return err
		}
		a.protectPorts(adminLn)
		go func() { _ = a.admin.Serve(adminLn) }()
		defer a.admin.Close()
	}
	if err := a.exec.Start(ctx); err != nil {
		return err
	}
	defer a.stopExecutions()
	a.upstream.Start()
	a.log.Info("serving MCP on stdio", zap.Int("tools", a.reg.Load().Len()), zap.String("workspace", absPath(a.cfg.Workspace)))
	err := a.mcp.ServeStdio(ctx, io.NopCloser(stdin), nopWriteCloser{stdout})
	a.log.Info("stdio closed")
	return err
}

// stopExecutions drains this process's executions when stdio ends: they
// may finish within the grace period; past it, they are interrupted.
func (a *app) stopExecutions() {
	a.exec.Drain()
	select {
	case <-a.exec.Idle():
		return
	case <-time.After(a.grace):
	}
	a.interruptExecutions()
}

// interruptExecutions ends this process's executions still running after
// the grace period (idempotent ones go back to the queue for another
// replica; others end interrupted) and waits, briefly, for them to stop.
func (a *app) interruptExecutions() {
	a.exec.Interrupt(errDraining)
	select {
	case <-a.exec.Idle():
	case <-time.After(5 * time.Second):
		a.log.Error("async executions did not end after cancellation; the queue gives them to another replica")
	}
}

func (a *app) announce(stdout io.Writer, ln, adminLn net.Listener) {
	// Both addresses in one write: whoever reads stdout for them (a test,
	// a supervisor) sees both lines at once, never the first alone.
	var b strings.Builder
	fmt.Fprintf(&b, "toold %s listening on %s, serving %d tools from workspace %s\n",
		versionString(), listenURL(ln.Addr()), a.reg.Load().Len(), absPath(a.cfg.Workspace))
	fmt.Fprintf(&b, "console on %s%s\n", listenURL(ln.Addr()), console.Prefix)
	if adminLn != nil {
		pprof := ""
		if a.pprof() {
			pprof = ", pprof on " + listenURL(adminLn.Addr()) + "/debug/pprof/"
		}
		fmt.Fprintf(&b, "metrics on %s/metrics%s\n", listenURL(adminLn.Addr()), pprof)
	}
	_, _ = io.WriteString(stdout, b.String())
	a.log.Info("listening", zap.String("addr", ln.Addr().String()), zap.Int("tools", a.reg.Load().Len()),
		zap.String("workspace", absPath(a.cfg.Workspace)))
	if a.insecure {
		msg := "toold serves a non-loopback address WITHOUT authentication (-insecure-no-auth): anyone who can reach it can run its tools"
		fmt.Fprintln(stdout, "WARNING:", msg)
		a.log.Warn(msg, zap.String("addr", ln.Addr().String()))
	}
}

// drain stops taking work and lets accepted calls finish within the grace
// period, still serving meanwhile (readiness 503, new calls 503 draining);
// past it, their contexts are cancelled and each still gets its envelope.
// Then the listeners close and the process exits 0.
func (a *app) drain() error {
	a.srv.Drain()
	a.exec.Drain()
	a.log.Info("draining", zap.Duration("grace", a.grace))
	grace := time.NewTimer(a.grace) // one grace for calls and executions together
	defer grace.Stop()
	idle := func() bool {
		for _, done := range []<-chan struct{}{a.srv.Idle(), a.exec.Idle()} {
			select {
			case <-done:
			case <-grace.C:
				return false
			}
		}
		return true
	}
	if !idle() {
		a.log.Warn("grace period over: cancelling the calls still running")
		// MCP calls first, answered before their HTTP requests end: the
		// SDK writes nothing once a request's context is cancelled.
		a.mcp.CancelAll(errDraining)
		a.srv.WaitMCP(time.Second)
		a.cancelCalls(errDraining)
		// The calls, cancelled, answer while the executions stop.
		a.interruptExecutions()
		select {
		case <-a.srv.Idle():
		case <-time.After(5 * time.Second):
			a.log.Error("calls did not answer after cancellation; closing anyway")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := a.api.Shutdown(ctx)
	if a.admin != nil {
		_ = a.admin.Close()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	a.log.Info("stopped")
	return nil
}
