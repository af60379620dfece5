package command

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/go-playground/validator/v10"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/tools"
)

// Set is the command tools of one configuration. It owns the launcher
// threads and the temporary directories of its commands: Close it at
// shutdown (commands still running are killed).
type Set struct {
	cfg      Config
	log      *zap.Logger
	host     *host
	tmpBase  string
	tools    []tools.Tool
	describe []string
}

// New validates cfg and builds its tools: every problem (a template that
// does not parse, a program that does not exist, a working directory
// outside workspace, a containment mode this machine cannot provide, a
// duplicate name) is reported, each naming its tool.
func New(cfg Config, workspace string, log *zap.Logger) (*Set, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	ws, err := resolveWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg, log: log}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	if s.tmpBase, err = os.MkdirTemp("", "toold-command-"); err != nil {
		return nil, fmt.Errorf("commands: %w", err)
	}
	// Traversable by the run-as uid, which owns its run's directory only.
	if err := os.Chmod(s.tmpBase, 0o711); err != nil {
		return nil, fmt.Errorf("commands: %w", err)
	}
	s.host = newHost(cfg, ws)
	var errs []error
	names := map[string]bool{}
	add := func(t tools.Tool, err error, name string) {
		if err == nil && names[name] {
			err = errors.New("the name is used twice")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("command tool %q: %w", name, err))
			return
		}
		names[name] = true
		s.tools = append(s.tools, t)
		s.describe = append(s.describe, name+": "+t.Spec().Containment)
	}
	for _, tc := range cfg.Tools {
		t, err := s.declared(tc)
		add(t, err, tc.Name)
	}
	if cfg.ExecuteCommand.Enabled {
		t, err := s.executeTool(cfg.ExecuteCommand)
		add(t, err, ExecuteCommandName)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, line := range s.describe {
		log.Debug("command tool", zap.String("tool", line))
	}
	ok = true
	return s, nil
}

func newHost(cfg Config, ws string) *host {
	h := &host{root: os.Geteuid() == 0, uid: DefaultUID, gid: DefaultUID, workspace: ws,
		launchers: map[Mode]*launcher{}}
	if cfg.RunAs.UID != nil {
		h.uid = *cfg.RunAs.UID
	}
	if cfg.RunAs.GID != nil {
		h.gid = *cfg.RunAs.GID
	}
	h.bwrap, h.bwrapErr = findBwrap(cfg.Bwrap)
	return h
}

// Tools returns the declarative tools in configuration order, then
// execute_command when it is enabled.
func (s *Set) Tools() []tools.Tool { return slices.Clone(s.tools) }

// Describe returns one line per tool for the start-up log: its name and the
// containment chosen, with why (for auto) and what it does not isolate.
func (s *Set) Describe() []string { return slices.Clone(s.describe) }

// Close stops the launcher threads (killing commands still running) and
// removes the temporary directories.
func (s *Set) Close() error {
	if s.host != nil {
		s.host.mu.Lock()
		for _, l := range s.host.launchers {
			l.close()
		}
		s.host.launchers = map[Mode]*launcher{}
		s.host.cg.close()
		s.host.mu.Unlock()
	}
	if s.tmpBase != "" {
		return os.RemoveAll(s.tmpBase)
	}
	return nil
}

// sandbox resolves a tool's isolation settings.
func (s *Set) sandbox(c Sandbox) (*sandbox, error) {
	want := Mode(c.Containment)
	if want == "" {
		want = Mode(s.cfg.Containment)
	}
	switch want {
	case "":
		want = ModeAuto
	case ModeAuto, ModeNone, ModeNamespaces, ModeBwrap:
	default:
		return nil, fmt.Errorf("containment %q is not one of auto, none, namespaces, bwrap", want)
	}
	mode, why, l, err := s.host.resolve(want)
	if err != nil {
		return nil, fmt.Errorf("containment %s: %w", want, err)
	}
	h := s.host
	drop := h.root && h.uid != 0
	sb := &sandbox{mode: mode, reason: why, launcher: l, bwrap: h.bwrap, network: c.Network,
		writable: c.WorkspaceWritable, roPaths: c.ReadOnlyPaths, drop: drop, uid: h.uid, gid: h.gid,
		userns: mode == ModeNamespaces && !h.root,
		procs:  drop || (mode == ModeBwrap && !h.root), maxOut: firstPositive(c.MaxOutputBytes, s.cfg.MaxOutputBytes, DefaultMaxOutputBytes),
		grace: s.cfg.KillGrace, env: buildEnv(c.EnvAllow, c.Env)}
	if sb.grace <= 0 {
		sb.grace = DefaultKillGrace
	}
	lim := c.Rlimits.merge(s.cfg.Rlimits).merge(defaultRlimits())
	sb.finish(h, lim)
	sb.limits = lim.list(sb.procs && !sb.pidsByCgroup())
	for _, p := range c.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("read_only_paths: %q is not absolute", p)
		}
	}
	return sb, nil
}

// programSandbox resolves the sandbox of a program that is not a command
// tool (Runner, Start): a command tool's, but for its rlimits.
func (s *Set) programSandbox(c Sandbox) (*sandbox, error) {
	c.Rlimits = c.Rlimits.unboundedUnlessSet()
	return s.sandbox(c)
}

// buildEnv is the command's environment: the allowed variables toold has,
// then the fixed ones. Nothing else of toold's environment is passed on.
func buildEnv(allow []string, fixed map[string]string) []string {
	var env []string
	for _, name := range allow {
		if _, set := fixed[name]; set {
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	keys := make([]string, 0, len(fixed))
	for k := range fixed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+fixed[k])
	}
	return env
}

func envPath(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return defaultPath
}

// findProgram resolves a program to an absolute path through path (the
// command's PATH), as execve will see it.
func findProgram(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("program %q: give an absolute path or a bare name", name)
		}
		return name, executable(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, name); filepath.IsAbs(p) && executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("program %q is not found on PATH %s", name, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("program %s: %w", p, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("program %s is not executable", p)
	}
	return nil
}

// resolveWorkspace returns the workspace's real absolute path.
func resolveWorkspace(ws string) (string, error) {
	abs, err := filepath.Abs(ws)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("commands: workspace: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("commands: workspace %s is not a directory", abs)
	}
	return abs, nil
}

// resolveDir confines a working directory to the workspace: a local path,
// whose symlinks resolve inside the workspace, naming a directory. The
// resolved path is what the command gets, so a link cannot be followed
// later by the chdir.
func resolveDir(ws, rel string) (string, error) {
	if rel == "" {
		rel = "."
	}
	if !filepath.IsLocal(rel) {
		return "", tools.NewSecurityError("directory %q is not a relative path inside the workspace", rel).
			WithCode("outside_workspace").WithSuggestion("use a path relative to the workspace, without \"..\"")
	}
	real, err := filepath.EvalSymlinks(filepath.Join(ws, rel))
	if err != nil {
		return "", tools.NewUserError("directory %q does not exist in the workspace", rel).Wrap(err)
	}
	if real != ws && !strings.HasPrefix(real, ws+string(filepath.Separator)) {
		return "", tools.NewSecurityError("directory %q leads outside the workspace through a symlink", rel).WithCode("outside_workspace")
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", tools.NewUserError("%q is not a directory", rel)
	}
	return real, nil
}

func firstPositive(v ...int) int {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 0
}

// validateConfig applies the struct tags, as toold's config loader does,
// so New alone refuses what the loader would.
func validateConfig(cfg Config) error {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		return name
	})
	var verrs validator.ValidationErrors
	if err := v.Struct(cfg); errors.As(err, &verrs) {
		msgs := make([]string, len(verrs))
		for i, fe := range verrs {
			ns := fe.Namespace()
			_, ns, _ = strings.Cut(ns, ".")
			msgs[i] = fmt.Sprintf("commands.%s: fails the %q rule", ns, fe.Tag())
			if p := fe.Param(); p != "" {
				msgs[i] = fmt.Sprintf("commands.%s: fails the %q rule (%s)", ns, fe.Tag(), p)
			}
		}
		return errors.New(strings.Join(msgs, "\n"))
	} else if err != nil {
		return fmt.Errorf("commands: %w", err)
	}
	return nil
}
