package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/ospath"
)

// options are the command line, after TOOLD_* environment defaults.
type options struct {
	config         string
	listen         string
	adminListen    string
	workspace      string
	logLevel       string
	insecureNoAuth bool
	drainGrace     time.Duration
	stateDir       string
	natsURL        string
	checkConfig    string
	hashKey        bool
	newKey         bool
	version        bool
	stdio          bool
	stdioKey       string
	watch          bool
	set            map[string]bool // flags given explicitly or by env
}

// parseFlags reads args; every setting flag also reads TOOLD_<NAME> (dashes
// as underscores), and a flag on the command line wins over the variable.
func parseFlags(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*options, error) {
	o := &options{set: map[string]bool{}}
	fs := flag.NewFlagSet("toold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeFlags(fs, o)
	fs.StringVar(&o.listen, "listen", "", "API listen `address` (default 127.0.0.1:8080)")
	fs.StringVar(&o.adminListen, "admin-listen", "", "metrics (and pprof) listen `address` (default 127.0.0.1:9090; \"off\" disables)")
	fs.StringVar(&o.workspace, "workspace", "", "`directory` the file tools are confined to (default: the current directory; with -stdio it must be given when that is / or $HOME)")
	fs.StringVar(&o.logLevel, "log-level", "", "log `level`: debug, info, warn or error")
	fs.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "allow a non-loopback listen address without API keys (warns at every start)")
	fs.DurationVar(&o.drainGrace, "drain-grace", 0, "how long accepted calls may finish after SIGTERM (default 30s)")
	fs.StringVar(&o.checkConfig, "check-config", "", "validate the configuration `file`, list every problem, and exit")
	fs.BoolVar(&o.hashKey, "hash-key", false, "read an API key on stdin and print the SHA-256 the config stores")
	fs.BoolVar(&o.newKey, "new-key", false, "print a new random API key and its SHA-256")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP, for hosts that launch servers as processes (logs go to stderr)")
	fs.BoolVar(&o.watch, "watch", false, "reload the configuration file when it changes (as SIGHUP, POST /admin/reload and toold reload do)")
	fs.StringVar(&o.stdioKey, "stdio-key", "", "with -stdio: the `name` of the key (auth.keys) whose tools and roles the host has (default mcp.stdio_key; required when keys are configured)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: toold [flags]\n       toold audit verify|export|keygen|public-key [-config FILE] [-state-dir DIR] [-nats-url URL] ...\n       toold reload [-config FILE] [-state-dir DIR] [-nats-url URL]\n\n"+
			"Every setting flag may also be given as TOOLD_<FLAG> (TOOLD_LISTEN, TOOLD_LOG_LEVEL, ...).\n\n")
		fs.PrintDefaults()
	}
	if err := envDefaults(fs, o, lookupEnv); err != nil {
		fmt.Fprintln(stderr, "toold:", err)
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err // the flag package has printed it
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q (flags start with -)", fs.Args())
		fmt.Fprintln(stderr, "toold:", err)
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

// storeFlags registers the flags that say where the configuration and the
// state store are. The server and `toold audit` share them, so both read
// the same store from the same flags and TOOLD_* variables.
func storeFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.config, "config", "", "configuration `file` (YAML), read on top of the built-in defaults")
	fs.StringVar(&o.stateDir, "state-dir", "", "`directory` of the embedded state store (default: one per workspace, under $XDG_STATE_HOME/toold or ~/.local/state/toold)")
	fs.StringVar(&o.natsURL, "nats-url", "", "external NATS `url` for the state store instead of the embedded one")
}

// envDefaults sets every setting flag registered on fs so far from
// TOOLD_<NAME> (dashes as underscores), before the command line is parsed
// so that a flag given there wins over the variable.
func envDefaults(fs *flag.FlagSet, o *options, lookupEnv func(string) (string, bool)) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envVar(f.Name)
		if v, ok := lookupEnv(name); ok && v != "" && isSetting(f.Name) {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
			o.set[f.Name] = true
		}
	})
	return envErr
}

// envVar is the environment variable of the flag name: TOOLD_ADMIN_LISTEN
// for admin-listen.
func envVar(name string) string {
	return "TOOLD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// isSetting tells the flags that configure a server from those that are
// one-off commands (which the environment must not trigger).
func isSetting(name string) bool {
	switch name {
	case "check-config", "hash-key", "new-key", "version", "stdio":
		return false
	}
	return true
}

// apply lays the flags over a loaded configuration.
func (o *options) apply(c *config.Config) {
	if o.set["listen"] {
		c.Listen = o.listen
	}
	if o.set["admin-listen"] {
		c.AdminListen = o.adminListen
		if strings.EqualFold(o.adminListen, "off") {
			c.AdminListen = ""
		}
	}
	if o.set["workspace"] {
		c.Workspace = o.workspace
	}
	if o.set["log-level"] {
		c.LogLevel = o.logLevel
	}
	if o.set["insecure-no-auth"] {
		c.InsecureNoAuth = o.insecureNoAuth
	}
	if o.set["drain-grace"] {
		c.Server.DrainGrace = o.drainGrace
	}
	if o.set["state-dir"] {
		c.State.Dir = o.stateDir
	}
	if o.set["nats-url"] {
		c.State.NATS.URL = o.natsURL
	}
	if o.set["stdio-key"] {
		c.MCP.StdioKey = o.stdioKey
	}
	if o.stdio && !o.set["admin-listen"] {
		// A host may launch several toold processes: none claims a port
		// unless told to.
		c.AdminListen = ""
	}
}

// checkStdioWorkspace refuses to serve the file system root or the home
// directory as the workspace when nobody chose it. Agent hosts launch
// `toold -stdio` from / or $HOME, and the default workspace is the current
// directory: every file of the machine, or of the user (keys, tokens,
// shell history), would be one read_file away from the model. A workspace
// given with -workspace or TOOLD_WORKSPACE is the operator's choice and
// served as given.
func (o *options) checkStdioWorkspace(cfg *config.Config, lookupEnv func(string) (string, bool)) error {
	if o.set["workspace"] {
		return nil
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return fmt.Errorf("-stdio: the workspace %q: %v; pass -workspace DIR", cfg.Workspace, err)
	}
	what := wideWorkspace(ws, lookupEnv)
	if what == "" {
		return nil
	}
	return fmt.Errorf("-stdio without -workspace would serve %s to the model: every file there would be readable. "+
		"Pass -workspace DIR (the project the host works on), or set TOOLD_WORKSPACE", what)
}

// checkStdioKey refuses -stdio without a named caller where keys are
// configured: the host at the other end of stdio presents no key, and an
// anonymous caller would either hold every tool and role (the local user's
// rights where there are no keys) or be refused by every step that checks
// keys, such as a call resumed after it waited. The operator names the key
// whose tools and roles the host has.
func checkStdioKey(cfg *config.Config) error {
	if len(cfg.Auth.Keys) == 0 || cfg.MCP.StdioKey != "" {
		return nil
	}
	return fmt.Errorf("-stdio with auth.keys configured needs the caller named: pass -stdio-key NAME (or set mcp.stdio_key) " +
		"with the name of the key whose tools and roles the host should have")
}

// sameDir reports whether a and b name one directory, following symlinks
// (a home under /home -> /usr/home is still the home).
func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		ra, rb = filepath.Clean(a), filepath.Clean(b)
	}
	plat := ospath.Host() // APFS and NTFS: /Users/Me is /users/me
	return plat.Fold(ra) == plat.Fold(rb)
}

// contains reports whether dir is an ancestor of p, symlinks followed.
func contains(dir, p string) bool {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return !sameDir(dir, p) && ospath.Host().Within(dir, p)
}
