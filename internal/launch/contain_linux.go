package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Linux's side of the platform seam (platform.go): the containment modes
// none, namespaces and bwrap, started from launcher threads (launcher_linux.go)
// with per-run cgroups (cgroup_linux.go) and, for namespaces, a minimal root
// (root_linux.go) or the shim (shim_linux.go).

// Linux applies a sandbox's rlimits to every run (prlimit on the stopped
// child, see launcher_linux.go).
const hasRlimits = true

// limitsAddressSpace: Linux enforces RLIMIT_AS.
const limitsAddressSpace = true

// groupOnly is how the descendants of a run without cgroups or a PID
// namespace are ended here.
const groupOnly = "process group, and processes marked with TOOLD_RUN_ID (best effort)"

// command builds the exec.Cmd of one run; argv[0] is absolute.
func (sb *sandbox) command(argv []string, dir, workspace, tmp string, env []string) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: dir, Env: env, SysProcAttr: attr}
	switch sb.mode {
	case ModeNamespaces:
		// As root the mount namespace is the run's own already (root.go).
		attr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if !sb.network {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
		if sb.userns {
			// No maps here: the launcher thread writes them at the
			// trampoline's exec stop, and the trampoline execs the shim,
			// uid 0 of the namespace, which so gets its capabilities; it
			// drops them all before the command's (shim_linux.go).
			attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
			u := sb.launcher.userns
			cmd.Path, cmd.Dir = u.trampoline, ""
			ports := u.ports.Load()
			cmd.ExtraFiles = []*os.File{u.exe}
			if ports != nil {
				cmd.ExtraFiles = append(cmd.ExtraFiles, ports.file) // shimPortsFD
			}
			var eg *egressSpec
			if sb.net != nil {
				spec, files := sb.egressFiles(len(cmd.ExtraFiles), nil)
				cmd.ExtraFiles, eg = append(cmd.ExtraFiles, files...), &spec
			}
			cmd.Args = append([]string{u.trampoline, "--", "/proc/self/fd/" + strconv.Itoa(shimExeFD)}, sb.shimArgs(argv, dir, workspace, ports != nil, eg)...)
		}
	case ModeBwrap:
		args := append([]string{sb.bwrap}, sb.bwrapArgs(argv[0], dir, workspace, tmp)...)
		for _, g := range sb.gitDirs(argv[0], workspace) {
			args = append(args, "--ro-bind", g, g)
		}
		first := 0
		if sb.filtered() {
			args = append(args, "--seccomp", strconv.Itoa(filterFD)) // the pipe prepareRun made
			first = 1
		}
		if sb.helped() {
			spec, files := sb.egressFiles(first, sb.self)
			cmd.ExtraFiles = files // after the filter pipe (launcher.startRun)
			argv = helperArgv(3+first, spec, argv)
		}
		cmd.Path, cmd.Args, cmd.Dir = sb.bwrap, append(append(args, "--"), argv...), ""
	}
	return cmd
}

// runMounts is what a run of the minimal root adds to it: its /tmp, the
// workspace, the read-only paths and the program when it is elsewhere.
func (sb *sandbox) runMounts(program, workspace string) (*callMounts, error) {
	if !sb.minimalRoot() || sb.userns {
		return nil, nil // the shim mounts them (shim.go)
	}
	trees, err := openTrees(sb.linuxRunPaths(program, workspace))
	if err != nil {
		return nil, err
	}
	// The run's /tmp is made here, not on the launcher thread, whose
	// syscall filter denies making mounts (seccomp_linux.go).
	tmp, err := newTmpfs(sb.tmpSize)
	if err != nil {
		closeTrees(trees)
		return nil, err
	}
	return &callMounts{tmpSize: sb.tmpSize, trees: trees, tmpMount: tmp}, nil
}

// prepareRun readies what a run of sb needs around its start: the minimal
// root's mounts for the run and its cgroups, made before the child exists
// so the launcher thread can put them in place between its fork and its
// first instruction. release closes what was opened for that (the caller
// calls it once the run started or failed); cg, when not nil, is the
// caller's to remove when the run ends.
func (l *Launcher) prepareRun(sb *sandbox, program, _, _ string) (rs runSetup, cg *runCgroup, release func(), err error) {
	var closers []func()
	release = func() {
		for _, c := range closers {
			c()
		}
	}
	defer func() {
		if err != nil {
			release()
			cg.remove()
			cg = nil
		}
	}()
	if rs.mounts, err = sb.runMounts(program, l.host.workspace); err != nil {
		return rs, nil, release, fmt.Errorf("preparing the run's file system: %w", err)
	}
	if rs.mounts != nil {
		cm := rs.mounts
		closers = append(closers, cm.close) // attached or not, the descriptors go
	}
	if sb.filtered() && sb.mode == ModeBwrap {
		if rs.filter, err = filterPipe(); err != nil {
			return rs, nil, release, fmt.Errorf("the run's syscall filter: %w", err)
		}
		f := rs.filter
		closers = append(closers, func() { _ = f.Close() })
	}
	if sb.cg.usable() {
		if cg, err = sb.cg.newRun(sb.call); err != nil {
			return rs, nil, release, err
		}
		if rs.cgProcs, err = cg.procsFiles(); err != nil {
			return rs, cg, release, err
		}
		fds := rs.cgProcs
		closers = append(closers, func() { closeFDs(fds) })
	}
	rs.limits = sb.launcherLimits()
	return rs, cg, release, nil
}

// launcher returns the started launcher for a mode, starting it (and
// probing that a command really starts) on first use; h.mu is held.
func (h *host) launcher(mode Mode) (*launcher, error) {
	return h.started(mode, profile{mode: mode, drop: h.root && h.uid != 0, uid: h.uid, gid: h.gid,
		userns: mode == ModeNamespaces && !h.root, filter: mode == ModeNamespaces && h.root})
}

// unfilteredNamespaces is the launcher of namespaces (root) for sandboxes
// with seccomp: false: a thread of its own, without the filter the
// mode's thread holds; started and probed on first use.
func (h *host) unfilteredNamespaces() (*launcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started("namespaces, unfiltered", profile{mode: ModeNamespaces, drop: h.root && h.uid != 0, uid: h.uid, gid: h.gid})
}

// started returns the launcher kept under key, or starts one from p,
// probes it, guards it and keeps it; h.mu is held.
func (h *host) started(key Mode, p profile) (*launcher, error) {
	if l, ok := h.launchers[key]; ok {
		return l, nil
	}
	l, err := newLauncher(p)
	if err != nil {
		return nil, err
	}
	if err := h.probe(l, p.mode); err != nil {
		l.close()
		return nil, err
	}
	if err := h.guardNew(l); err != nil {
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
	sb := &sandbox{mode: mode, bwrap: h.bwrap, userns: mode == ModeNamespaces && !h.root, launcher: l}
	tmp, err := os.MkdirTemp("", "toold-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := sb.command([]string{truePath}, "/", h.workspace, tmp, nil)
	out := &strings.Builder{}
	cmd.Stderr = out
	var rs runSetup
	if rs.mounts, err = sb.runMounts(truePath, h.workspace); err != nil {
		return fmt.Errorf("%s does not work here: %w", mode, err)
	}
	if rs.mounts != nil {
		defer rs.mounts.close()
	}
	if err := l.start(cmd, rs); err != nil {
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

// resolve picks the mode for a tool: an explicit mode must work; auto
// takes namespaces when root and usable, else bwrap when usable, else (not
// root) namespaces in an unprivileged user namespace. auto never settles
// for none: without a sandbox a tool does not start, and the error says
// that only an explicit `containment: none` runs commands unisolated.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	try := func(m Mode) (*launcher, error) {
		if m == ModeBwrap && h.bwrapErr != nil {
			return nil, h.bwrapErr
		}
		if m == ModeNamespaces && h.nsErr != nil {
			return nil, h.nsErr
		}
		l, err := h.launcher(m)
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
	}
	if l, err := try(ModeBwrap); err == nil {
		return ModeBwrap, "auto: " + strings.Join(append(why, "toold is not root"), "; "), l, nil
	} else {
		why = append(why, "bwrap: "+err.Error())
	}
	if !h.root {
		l, err := try(ModeNamespaces)
		if err == nil {
			return ModeNamespaces, "auto: not root, no bubblewrap", l, nil
		}
		why = append(why, "user namespaces: "+err.Error())
	}
	return "", "", nil, &noSandboxError{why: why}
}

// noSandboxError is auto finding no sandbox on this machine.
type noSandboxError struct{ why []string }

func (e *noSandboxError) Error() string {
	return "no sandbox works on this machine (" + strings.Join(e.why, "; ") + "): run toold as root, " +
		"install bubblewrap, or allow unprivileged user namespaces (kernel.unprivileged_userns_clone, " +
		"user.max_user_namespaces); to run commands without isolation write `containment: none` " +
		"explicitly (every call then says \"containment: none (not isolated)\")"
}

// linuxRunPaths are runPaths and, on top of a writable workspace, its git
// directory read-only (gitDirs).
func (sb *sandbox) linuxRunPaths(program, workspace string) ([]string, []bool) {
	paths, ro := sb.runPaths(program, workspace)
	for _, g := range sb.gitDirs(program, workspace) {
		paths, ro = append(paths, g), append(ro, true)
	}
	return paths, ro
}

// gitDirs is what a run of a writable workspace must not change: the
// workspace's .git (a directory, or a worktree's .git file), followed
// when it is a link inside the workspace. A program that writes the
// workspace would otherwise plant code another tool runs: a filter or
// fsmonitor in .git/config, a hook (issue 24, finding 3). Bound read-only
// over the workspace in namespaces and bwrap runs, it can be neither
// written, replaced nor renamed (a mount point). A repository made later
// below the workspace is not covered: git tools switch off its programs
// (internal/tools/command, git.go and gitdrivers.go). git itself may
// write it (git add, git commit): the command tools run every git with
// the repository's programs switched off, filters and merge drivers
// included, so what git writes there runs nothing.
func (sb *sandbox) gitDirs(program, workspace string) []string {
	if !sb.writable || filepath.Base(program) == "git" {
		return nil
	}
	real, err := filepath.EvalSymlinks(filepath.Join(workspace, ".git"))
	if err != nil || !strings.HasPrefix(real, workspace+"/") {
		return nil
	}
	return []string{real}
}
