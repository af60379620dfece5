package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/toold/toold/internal/ospath"
)

// Launcher starts every program toold runs: command tools, stdio MCP
// servers, consultation CLIs. It owns the launcher threads, the per-run
// cgroups and the runs' temporary directories: Close it at shutdown
// (programs still running are killed).
type Launcher struct {
	cfg     Config
	host    *host
	tmpBase string
}

// New learns what the machine offers for cfg (whose keys toold's config
// loader has checked); containment modes are tried when a sandbox first
// asks for one. workspace is the directory every program works in.
func New(cfg Config, workspace string) (*Launcher, error) {
	ws, err := resolveWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	l := &Launcher{cfg: cfg}
	if l.tmpBase, err = os.MkdirTemp("", "toold-command-"); err != nil {
		return nil, fmt.Errorf("commands: %w", err)
	}
	// Traversable by the run-as uid, which owns its run's directory only.
	if err := os.Chmod(l.tmpBase, 0o711); err != nil {
		_ = os.RemoveAll(l.tmpBase)
		return nil, fmt.Errorf("commands: %w", err)
	}
	l.host = newHost(cfg, ws)
	return l, nil
}

func newHost(cfg Config, ws string) *host {
	h := &host{root: os.Geteuid() == 0, uid: DefaultUID, gid: DefaultUID, workspace: ws,
		launchers: map[Mode]*launcher{}, rl: hostRlimits}
	if cfg.RunAs.UID != nil {
		h.uid = *cfg.RunAs.UID
	}
	if cfg.RunAs.GID != nil {
		h.gid = *cfg.RunAs.GID
	}
	h.bwrap, h.bwrapErr = findBwrap(cfg.Bwrap)
	return h
}

// Modes are the containment modes this OS provides, auto aside, in the
// order auto prefers them last (none first).
func Modes() []Mode {
	var out []Mode
	for _, m := range osModes {
		if m != ModeAuto {
			out = append(out, m)
		}
	}
	return out
}

// Workspace is the workspace's real absolute path.
func (l *Launcher) Workspace() string { return l.host.workspace }

// Close stops the launcher threads (killing programs still running) and
// removes the temporary directories.
func (l *Launcher) Close() error {
	l.host.mu.Lock()
	for _, t := range l.host.launchers {
		t.close()
	}
	l.host.launchers = map[Mode]*launcher{}
	l.host.cg.close()
	l.host.closePlatform()
	if l.host.self != nil {
		_ = l.host.self.Close()
	}
	l.host.mu.Unlock()
	return os.RemoveAll(l.tmpBase)
}

// CommandRunner resolves the sandbox of a command tool: the Config's
// rlimits apply in full. Call it while wiring: resolving may start a
// containment launcher.
func (l *Launcher) CommandRunner(c Sandbox) (*Runner, error) {
	sb, err := l.sandbox(c)
	if err != nil {
		return nil, err
	}
	return &Runner{l: l, sb: sb, path: envPath(sb.env)}, nil
}

// Runner resolves the sandbox of a program that is not a command tool
// (a consultation CLI): as a command tool's, but with no CPU-time or
// address-space limit unless c sets one.
func (l *Launcher) Runner(c Sandbox) (*Runner, error) {
	c.Rlimits = c.Rlimits.unboundedUnlessSet()
	return l.CommandRunner(c)
}

// sandbox resolves a program's isolation settings.
func (l *Launcher) sandbox(c Sandbox) (*sandbox, error) {
	want := Mode(c.Containment)
	if want == "" {
		want = Mode(l.cfg.Containment)
	}
	switch want {
	case "":
		want = ModeAuto
	case ModeAuto, ModeNone, ModeNamespaces, ModeBwrap, ModeSeatbelt, ModeJob:
	default:
		return nil, fmt.Errorf("containment %q is not one of auto, none, namespaces, bwrap, seatbelt, job", want)
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	if err := l.privateOutOfReach(append(append([]string(nil), c.ReadOnlyPaths...), c.UnixSockets...)); err != nil {
		return nil, err
	}
	if !slices.Contains(osModes, want) {
		return nil, &unavailableError{mode: want, err: unsupported(runtime.GOOS, want, osModes)}
	}
	mode, why, t, err := l.host.resolve(want)
	if err != nil {
		return nil, &unavailableError{mode: want, err: err}
	}
	return l.build(c, mode, why, t)
}

// build is the sandbox of c in mode, once resolve has chosen the mode (why:
// the reason auto gave) and its launcher t. It is the one place a
// sandbox's fields are filled: the platform golden tests build theirs here
// too, so what they pin is what toold applies.
func (l *Launcher) build(c Sandbox, mode Mode, why string, t *launcher) (*sandbox, error) {
	h := l.host
	drop := h.root && h.uid != 0
	sb := &sandbox{mode: mode, reason: why, launcher: t, bwrap: h.bwrap, network: c.networkOn(),
		writable: c.WorkspaceWritable, roPaths: c.ReadOnlyPaths, sockets: c.UnixSockets, drop: drop, uid: h.uid, gid: h.gid,
		userns:   mode == ModeNamespaces && !h.root,
		procs:    hasRlimits && (drop || (mode == ModeBwrap && !h.root) || h.rl.headroom),
		headroom: h.rl.headroom && !drop, maxOut: firstPositive(c.MaxOutputBytes, l.cfg.MaxOutputBytes, DefaultMaxOutputBytes),
		grace: l.cfg.KillGrace, env: buildEnv(c.EnvAllow, c.Env), private: l.cfg.Private}
	if sb.grace <= 0 {
		sb.grace = DefaultKillGrace
	}
	var err error
	if sb.egress, err = l.compileNetwork(c, mode); err != nil {
		return nil, err
	}
	if sb.egress != nil && mode == ModeBwrap {
		if sb.self, err = h.selfExe(); err != nil {
			return nil, fmt.Errorf("%w: %v", errNoSelf, err)
		}
	}
	lim := c.Rlimits.merge(l.cfg.Rlimits).merge(defaultRlimits())
	sb.finish(h, lim)
	if err := sb.applySeccomp(h, c.Seccomp == nil || *c.Seccomp); err != nil {
		return nil, err
	}
	sb.limits = lim.listFor(h.rl, sb.procs && !sb.pidsByCgroup())
	h.saw(sb)
	return sb, nil
}

// privateOutOfReach refuses a read-only path that holds one of toold's own
// files (Config.Private): bound into a run whole, it would hand the program
// toold's state, configuration or audit key. macOS's profile denies them
// after every allowance, but the binds of namespaces and bwrap have no
// such rule, so the check is made here, for every platform alike.
func (l *Launcher) privateOutOfReach(roPaths []string) error {
	host := ospath.Host()
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	for _, ro := range roPaths {
		for _, own := range l.cfg.Private {
			if host.Within(ro, own) || host.Within(real(ro), real(own)) {
				return fmt.Errorf("read_only_paths: %s holds toold's own %s, which no program may read: name narrower directories beside it", ro, own)
			}
		}
	}
	return nil
}

// buildEnv is the program's environment: the allowed variables toold has,
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

// PathOf is the PATH a program of the sandbox gets: its Env's, else what
// EnvAllow brings from toold's environment, else DefaultPath.
func PathOf(c Sandbox) string { return envPath(buildEnv(c.EnvAllow, c.Env)) }

func envPath(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return DefaultPath
}

// FindProgram resolves a program to an absolute path through path (the
// program's PATH), as the OS will start it: an absolute path must be
// executable; a bare name is looked up (on Windows with the extensions of
// PATHEXT, candidates).
func FindProgram(name, path string) (string, error) {
	if filepath.Base(name) != name {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("program %q: give an absolute path or a bare name", name)
		}
		return name, executable(name)
	}
	for _, dir := range filepath.SplitList(path) {
		for _, p := range candidates(filepath.Join(dir, name)) {
			if filepath.IsAbs(p) && executable(p) == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("program %q is not found on PATH %s", name, path)
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

// ResolveDir confines a working directory to the workspace: a local path,
// whose symlinks resolve inside the workspace, naming a directory. The
// resolved path is what the program gets, so a link cannot be followed
// later by the chdir. A refusal is an *Error (Outside, NoDirectory).
func (l *Launcher) ResolveDir(rel string) (string, error) {
	ws := l.host.workspace
	if rel == "" {
		rel = "."
	}
	if !filepath.IsLocal(rel) {
		return "", &Error{Kind: Outside, Msg: fmt.Sprintf("directory %q is not a relative path inside the workspace", rel),
			Hint: `use a path relative to the workspace, without ".."`}
	}
	real, err := filepath.EvalSymlinks(filepath.Join(ws, rel))
	if err != nil {
		return "", &Error{Kind: NoDirectory, Msg: fmt.Sprintf("directory %q does not exist in the workspace", rel), Err: err}
	}
	if real != ws && !strings.HasPrefix(real, ws+string(filepath.Separator)) {
		return "", &Error{Kind: Outside, Msg: fmt.Sprintf("directory %q leads outside the workspace through a symlink", rel)}
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", &Error{Kind: NoDirectory, Msg: fmt.Sprintf("%q is not a directory", rel)}
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
