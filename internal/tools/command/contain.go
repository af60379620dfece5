package command

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Mode is how a command is isolated from the host.
type Mode string

// The containment modes. ModeAuto is resolved when the Set is built.
const (
	ModeAuto       Mode = "auto"
	ModeNone       Mode = "none"
	ModeNamespaces Mode = "namespaces"
	ModeBwrap      Mode = "bwrap"
)

// sandbox is a tool's resolved containment.
type sandbox struct {
	mode     Mode
	reason   string // why this mode (for auto)
	launcher *launcher
	bwrap    string
	network  bool
	writable bool
	roPaths  []string
	limits   []rlimit
	procs    bool // the process-count limit holds
	drop     bool // runs as uid:gid
	uid, gid int
	maxOut   int
	grace    time.Duration
	env      []string // allowed and fixed variables; per-run ones are added
}

// describe is the sandbox in one phrase, for discovery and the start-up log.
func (sb *sandbox) describe() string {
	parts := []string{string(sb.mode)}
	if sb.reason != "" {
		parts[0] += " (" + sb.reason + ")"
	}
	if sb.drop {
		parts = append(parts, fmt.Sprintf("uid %d", sb.uid))
	}
	switch {
	case sb.network:
		parts = append(parts, "network allowed")
	case sb.mode == ModeNone:
		parts = append(parts, "network NOT isolated (containment none)")
	default:
		parts = append(parts, "no network")
	}
	switch {
	case sb.writable:
		parts = append(parts, "workspace writable")
	case sb.mode == ModeNone:
		parts = append(parts, "workspace protected by file permissions only")
	default:
		parts = append(parts, "workspace read-only")
	}
	if !sb.procs {
		parts = append(parts, "no process-count limit (no dedicated uid)")
	}
	return strings.Join(parts, "; ")
}

// command builds the exec.Cmd of one run; argv[0] is absolute.
func (sb *sandbox) command(argv []string, dir, workspace, tmp string, env []string) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: dir, Env: env, SysProcAttr: attr}
	switch sb.mode {
	case ModeNamespaces:
		attr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if !sb.network {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
	case ModeBwrap:
		args := append([]string{sb.bwrap}, sb.bwrapArgs(argv[0], dir, workspace, tmp)...)
		cmd.Path, cmd.Args, cmd.Dir = sb.bwrap, append(append(args, "--"), argv...), ""
	}
	return cmd
}

// systemDirs are bound read-only into a bwrap sandbox when they exist; a
// symlink (merged /usr) is recreated as a symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

func (sb *sandbox) bwrapArgs(program, dir, workspace, tmp string) []string {
	a := []string{"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"}
	if sb.network {
		a = append(a, "--share-net")
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, p := range sb.roPaths {
		a = append(a, "--ro-bind-try", p, p)
	}
	if !underAny(program, systemDirs) {
		a = append(a, "--ro-bind", program, program)
	}
	bind := "--ro-bind"
	if sb.writable {
		bind = "--bind"
	}
	return append(a, bind, workspace, workspace, "--bind", tmp, tmp, "--chdir", dir)
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// host is what the Set learned about the machine, once. Sandboxes are
// resolved while serving too (upstream MCP servers start and restart), so
// the launchers and what was learned are guarded.
type host struct {
	mu        sync.Mutex // guards nsErr, bwrapErr and launchers
	root      bool
	uid, gid  int
	workspace string
	bwrap     string
	nsErr     error // why namespaces cannot be used; nil when they can
	bwrapErr  error
	launchers map[launchKey]*launcher
}

type launchKey struct {
	mode     Mode
	writable bool
}

// launcher returns the started launcher for a mode, starting it (and
// probing that a command really starts) on first use.
func (h *host) launcher(mode Mode, writable bool) (*launcher, error) {
	if mode != ModeNamespaces {
		writable = false // only namespaces mode mounts the workspace per profile
	}
	key := launchKey{mode, writable}
	if l, ok := h.launchers[key]; ok {
		return l, nil
	}
	l, err := newLauncher(profile{mode: mode, workspace: h.workspace, writable: writable, drop: h.root && h.uid != 0, uid: h.uid, gid: h.gid})
	if err != nil {
		return nil, err
	}
	if err := h.probe(l, mode); err != nil {
		l.close()
		return nil, err
	}
	h.launchers[key] = l
	return l, nil
}

// probe starts /bin/true the way commands will start, so an unusable mode
// fails at start-up with its reason rather than at the first call.
func (h *host) probe(l *launcher, mode Mode) error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	sb := &sandbox{mode: mode, bwrap: h.bwrap}
	tmp, err := os.MkdirTemp("", "toold-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := sb.command([]string{truePath}, "/", h.workspace, tmp, nil)
	out := &strings.Builder{}
	cmd.Stderr = out
	if err := l.start(cmd, nil); err != nil {
		if cmd.Process != nil {
			_ = cmd.Wait()
		}
		return fmt.Errorf("%s does not work here: %w", mode, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		err = <-done
	}
	if err != nil {
		return fmt.Errorf("%s does not work here: %v: %s", mode, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// resolve picks the mode for a tool: an explicit mode must work; auto takes
// namespaces when root and usable, else bwrap when usable, else none, and
// says why.
func (h *host) resolve(want Mode, writable bool) (Mode, string, *launcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	try := func(m Mode) (*launcher, error) {
		if m == ModeBwrap && h.bwrapErr != nil {
			return nil, h.bwrapErr
		}
		if m == ModeNamespaces && h.nsErr != nil {
			return nil, h.nsErr
		}
		l, err := h.launcher(m, writable)
		if err != nil && m == ModeNamespaces {
			h.nsErr = err
		} else if err != nil && m == ModeBwrap {
			h.bwrapErr = err
		}
		return l, err
	}
	if want != ModeAuto {
		l, err := try(want)
		return want, "", l, err
	}
	var why []string
	if h.root {
		l, err := try(ModeNamespaces)
		if err == nil {
			return ModeNamespaces, "auto: toold is root", l, nil
		}
		why = append(why, "namespaces: "+err.Error())
	} else {
		why = append(why, "namespaces: toold is not root")
	}
	if l, err := try(ModeBwrap); err == nil {
		return ModeBwrap, "auto: " + strings.Join(why, "; "), l, nil
	} else {
		why = append(why, "bwrap: "+err.Error())
	}
	l, err := try(ModeNone)
	return ModeNone, "auto, weakest: " + strings.Join(why, "; "), l, err
}

// findBwrap locates bubblewrap; an error says why it cannot be used.
func findBwrap(name string) (string, error) {
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("bubblewrap is not installed (%v)", err)
	}
	return filepath.Abs(p)
}
