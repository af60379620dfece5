package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/ospath"
)

// toold's own files — its configuration, the state store, the audit
// signing key and what else vouches for the audit log, the store's
// credentials — must lie outside the workspace it serves. Inside it, a
// tool reads them (an ingest key in tracing.headers, the store's records)
// and rewrites them: replace the audit key and toold signs with the
// attacker's after a restart; set confirmation: none in the config and
// nobody is asked at the next start.
//
// toold refuses to start rather than guard them as it guards .git: the
// guard is on writes, by the file tools, while here reading is an attack
// too, and so is every process a command tool, an MCP server or a
// consultation CLI starts in the workspace (grep, cat, a script). The
// store's directory is written by toold itself all the while, so it
// cannot be made read-only to anyone. Refusing covers every tool there is
// and every tool to come, and costs the operator one flag.

// ownFile is one of toold's own files and the setting that names it.
type ownFile struct {
	setting, path string
}

// ownFiles lists the files toold itself reads or writes, as the
// configuration (and the command line) name them; withState says whether
// the store is opened at all.
func ownFiles(cfg *config.Config, configFile string, withState bool) []ownFile {
	var files []ownFile
	add := func(setting, path string) {
		if path != "" {
			files = append(files, ownFile{setting, path})
		}
	}
	add("-config", configFile)
	// A tool that rewrote the policies would decide what it may do.
	for i, f := range cfg.Policy.Files {
		add(fmt.Sprintf("policy.files[%d]", i), f)
	}
	add("policy.schema", cfg.Policy.Schema)
	if !withState || !cfg.State.Enabled {
		return files
	}
	sc := cfg.State
	if dir, err := stateDir(cfg); err == nil && sc.NATS.URL == "" {
		add("state.dir (-state-dir)", dir)
	}
	a, n := sc.Audit, sc.NATS
	add("state.audit.signing_key_file", a.SigningKeyFile)
	add("state.audit.checkpoint_file", a.CheckpointFile)
	for i, k := range a.TrustedKeys {
		if !strings.HasPrefix(k, "ed25519:") {
			add(fmt.Sprintf("state.audit.trusted_keys[%d]", i), k)
		}
	}
	add("state.nats.credentials", n.Credentials)
	add("state.nats.nkey_seed_file", n.NKeySeedFile)
	add("state.nats.tls.key_file", n.TLS.KeyFile)
	add("state.nats.tls.ca_file", n.TLS.CAFile)
	return files
}

// privatePaths are toold's own files as absolute paths, for the launcher:
// no program it starts may read or write them, whatever its sandbox allows
// (launch.Config.Private).
func privatePaths(cfg *config.Config, configFile string, withState bool) []string {
	var out []string
	for _, f := range ownFiles(cfg, configFile, withState) {
		if p, err := filepath.Abs(f.path); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// checkOwnFiles refuses toold's own files inside the workspace, naming
// each and saying what to do.
func checkOwnFiles(cfg *config.Config, configFile string, withState bool) error {
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil // the workspace's own check says what is wrong with it
	}
	var problems []string
	for _, f := range ownFiles(cfg, configFile, withState) {
		p, err := filepath.Abs(f.path)
		if err == nil && within(ws, p) {
			problems = append(problems, fmt.Sprintf("%s (%s) lies inside the workspace %s", f.setting, p, ws))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("toold's own files must lie outside the workspace it serves, where no tool can read or rewrite them:\n  %s\n"+
		"Move them out (-state-dir DIR, -config FILE elsewhere), or give a narrower -workspace",
		strings.Join(problems, "\n  "))
}

// within reports whether p is dir or lies below it, symlinks followed as
// far as p exists (a state directory toold has not made yet is judged by
// its nearest existing parent).
// Names compare as the host's file system compares them: on a Mac or
// Windows a -state-dir spelled /users/me/WORK/state is inside /Users/me/work.
func within(dir, p string) bool {
	return ospath.Host().Within(resolved(dir), resolved(p))
}

// resolved is p with the symlinks of its longest existing prefix followed.
func resolved(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		} else if !errors.Is(err, os.ErrNotExist) {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// warnWideWorkspace says, on stdout and in the log, when an HTTP toold
// serves the root of the file system, the home directory, or a directory
// holding it: every file of the user's is then a read_file away. -stdio
// refuses such a workspace unless it was given, since hosts launch it
// from wherever they are; an HTTP toold is started by its operator, so it
// serves the workspace it was given and says so at every start.
func warnWideWorkspace(cfg *config.Config, lookupEnv func(string) (string, bool), stdout io.Writer, log *zap.Logger) {
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return
	}
	what := wideWorkspace(ws, lookupEnv)
	if what == "" {
		return
	}
	msg := "the workspace is " + what + ": every file there (keys, tokens, shell history) is readable by the tools toold serves; give a narrower -workspace"
	fmt.Fprintln(stdout, "WARNING:", msg)
	log.Warn(msg, zap.String("workspace", ws))
}

// wideWorkspace describes ws when it is the root of the file system, the
// home directory or holds it; "" otherwise.
func wideWorkspace(ws string, lookupEnv func(string) (string, bool)) string {
	home, ok := lookupEnv("HOME")
	if !ok {
		home, _ = lookupEnv("USERPROFILE") // Windows
	}
	switch {
	case filepath.Dir(ws) == ws: // "/", C:\
		return "the root of the file system"
	case sameDir(ws, "/"):
		return "the root of the file system"
	case home != "" && sameDir(ws, home):
		return "your home directory (" + ws + ")"
	case home != "" && contains(ws, home):
		return ws + ", which holds your home directory"
	}
	return ""
}
