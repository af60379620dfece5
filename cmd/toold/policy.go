package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/pins"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/tools/upstream"
)

// loadPolicy loads and checks policy.files against the schema; nil when
// none is configured. A bad policy is a configuration problem at its
// file, line and column: toold does not start.
func loadPolicy(cfg *config.Config) (*policy.Engine, error) {
	if !cfg.Policy.Enabled() {
		if cfg.Policy.Schema != "" {
			return nil, &config.Error{Problems: []config.Problem{{Path: "policy.schema", Message: "a schema without policy.files checks nothing"}}}
		}
		return nil, nil
	}
	eng, err := policy.Load(cfg.Policy, os.ReadFile)
	if err != nil {
		return nil, config.SectionError("policy", err)
	}
	return eng, nil
}

// startUpstream builds the hosted MCP servers' manager and, with the
// state store, the keeper of their tools' pins, which every replica
// watches: a decision taken anywhere has the server list its tools again
// here. Without the store nothing can be pinned, and toold says so.
func (a *app) startUpstream() (*pins.Keeper, error) {
	cfg := a.cfg
	opts := upstream.Options{SetTools: a.reg.SetSource, Launcher: a.launcher,
		Logger: a.log.Named("upstream"), Registerer: a.metrics, Version: versionString(), Delegate: a.delegate}
	if a.vaults != nil { // servers that call as each caller (acting as the user)
		opts.Vault = a.vaults
	}
	var keeper *pins.Keeper
	if a.store != nil {
		keeper = pins.New(a.store.Pins, a.log.Named("pins"))
		opts.Pins, opts.SetToolsHolding = keeper, a.reg.SetSourceHolding
	} else if pinned(cfg.MCP.Servers) {
		a.log.Warn("the tools of hosted MCP servers are not pinned: pinning needs the state store (state.enabled)")
	}
	var err error
	if a.upstream, err = upstream.New(cfg.MCP.Servers, opts); err != nil {
		return nil, &config.Error{Problems: []config.Problem{{Path: "mcp.servers", Message: err.Error()}}}
	}
	a.closers = append(a.closers, a.upstream.Close)
	if keeper != nil && len(cfg.MCP.Servers) > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		a.closers = append(a.closers, func() error { cancel(); return nil })
		if err := keeper.Watch(ctx, a.upstream.Relist); err != nil {
			return nil, fmt.Errorf("pins: watching the decisions of other replicas: %w", err)
		}
	}
	return keeper, nil
}

// pinned reports whether any server asks for pinning.
func pinned(servers []upstream.Config) bool {
	for _, s := range servers {
		if s.Pin == nil || *s.Pin {
			return true
		}
	}
	return false
}

const policyUsage = `usage: toold policy schema
       toold policy check [-config file] [-schema file] [policy.cedar ...]
       toold policy test  [-config file] [-schema file] [-policy policy.cedar ...] table.yaml

schema prints toold's Cedar schema; check loads the policies (the
configuration's policy.files, or the files named) and reports every
problem at its file, line and column; test decides each request of a YAML
table and compares with the decision it expects (docs/policy.md).`

// runPolicy is toold policy schema|check|test.
func runPolicy(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"schema", "check", "test"}, args[0]) {
		fmt.Fprintln(stderr, policyUsage)
		return exitCode(2)
	}
	cmd := args[0]
	if cmd == "schema" {
		_, err := stdout.Write(policy.Schema)
		return err
	}
	fs := flag.NewFlagSet("toold policy "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "take policy.files and policy.schema from this configuration `file`")
	schema := fs.String("schema", "", "check against this Cedar schema `file` instead of toold's")
	var files listFlag
	if cmd == "test" {
		fs.Var(&files, "policy", "a Cedar policy `file` (repeatable; default: the configuration's policy.files)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return exitCode(2)
	}
	pc := policy.Config{Schema: *schema}
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath, lookupEnv)
		if err != nil {
			fmt.Fprintf(stderr, "toold: the configuration has problems:\n%v\n", err)
			return exitCode(2)
		}
		pc = cfg.Policy
		if *schema != "" {
			pc.Schema = *schema
		}
	}
	rest := fs.Args()
	if cmd == "check" && len(rest) > 0 {
		pc.Files = rest
	}
	if cmd == "test" {
		if len(rest) != 1 {
			fmt.Fprintln(stderr, policyUsage)
			return exitCode(2)
		}
		if len(files) > 0 {
			pc.Files = files
		}
	}
	if len(pc.Files) == 0 {
		fmt.Fprintln(stderr, "toold: no policy files: name them, or give a configuration with policy.files")
		return exitCode(2)
	}
	eng, err := policy.Load(pc, os.ReadFile)
	if err != nil {
		fmt.Fprintf(stderr, "toold: the policies have problems:\n%v\n", err)
		return exitCode(1)
	}
	if cmd == "check" {
		fmt.Fprintf(stdout, "%d policies in %d files: ok\n", eng.Len(), len(pc.Files))
		return nil
	}
	return policyTest(eng, rest[0], stdout, stderr)
}

// policyTest runs a table of requests against the policies: one line per
// request, and exit status 1 when any decision is not the one expected.
func policyTest(eng *policy.Engine, path string, stdout, stderr io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "toold:", err)
		return exitCode(2)
	}
	table, err := policy.ParseTable(data)
	if err != nil {
		fmt.Fprintf(stderr, "toold: %s: %v\n", path, err)
		return exitCode(2)
	}
	results, err := eng.Run(table, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "toold: %s: %v\n", path, err)
		return exitCode(2)
	}
	failed := 0
	for _, r := range results {
		if r.Problem != "" {
			failed++
			fmt.Fprintf(stdout, "FAIL %s: %s\n", r.Case.Name, r.Problem)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s: %s\n", r.Case.Name, policy.Describe(r.Got))
	}
	fmt.Fprintf(stdout, "%d of %d as expected\n", len(results)-failed, len(results))
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}
