package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	userns   bool // namespaces without root: a user namespace per run
	uid, gid int
	maxOut   int
	grace    time.Duration
	env      []string // allowed and fixed variables; per-run ones are added
	cg       *cgroupHost
	call     callLimits // enforced by the run's cgroups, when there are any
	tmpSize  int64      // the run's /tmp (namespaces as root)
	// enforced is what each limit is enforced by, for every result.
	enforced map[string]string
}

// notIsolated is how a result of containment none names it.
const notIsolated = "none (not isolated)"

// minimalRoot says whether runs see the minimal root (namespaces: built by
// the launcher thread as root, by the shim without).
func (sb *sandbox) minimalRoot() bool { return sb.mode == ModeNamespaces }

// tmpfsTmp says whether a run's /tmp (and TMPDIR) is a tmpfs of its own:
// the minimal root's, or bwrap's --tmpfs.
func (sb *sandbox) tmpfsTmp() bool { return sb.minimalRoot() || sb.mode == ModeBwrap }

// short is the containment in a few words, as every result carries it.
func (sb *sandbox) short() string {
	switch {
	case sb.mode == ModeNone:
		return notIsolated
	case sb.userns:
		return "namespaces (unprivileged user namespace)"
	}
	return string(sb.mode)
}

// describe is the sandbox in one phrase, for discovery and the start-up log.
func (sb *sandbox) describe() string {
	parts := []string{sb.short()}
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
	case sb.mode == ModeNone:
		parts = append(parts, "host file system visible, workspace protected by file permissions only")
	case sb.writable:
		parts = append(parts, "workspace writable")
	default:
		parts = append(parts, "workspace read-only")
	}
	if sb.minimalRoot() {
		parts = append(parts, "minimal root, private /tmp")
	}
	if !sb.procs {
		parts = append(parts, "no process-count limit")
	}
	return strings.Join(parts, "; ")
}

// finish fills what follows from the mode and the host: the run's cgroup
// limits and what enforces each limit.
func (sb *sandbox) finish(h *host, r Rlimits) {
	sb.cg = h.cgroups()
	if sb.cg.usable() {
		sb.call = callLimits{memory: r.Memory, pids: r.Processes, cpus: r.CPUs}
		if _, ok := sb.cg.has("pids"); ok && r.Processes > 0 {
			sb.procs = true
		}
	}
	if sb.tmpfsTmp() {
		sb.tmpSize = max(r.TmpSize, 0)
	}
	sb.enforced = sb.enforcement(r)
}

// pidsByCgroup says whether the run's cgroup bounds its processes (the
// per-uid RLIMIT_NPROC, shared by concurrent runs, is then not set).
func (sb *sandbox) pidsByCgroup() bool {
	_, ok := sb.cg.has("pids")
	return ok && sb.call.pids > 0
}

// enforcement says, per limit, how a run is held to it.
func (sb *sandbox) enforcement(r Rlimits) map[string]string {
	e := map[string]string{}
	per := func(name string, v int64, unit string) string {
		if v < 0 {
			return "not limited"
		}
		return fmt.Sprintf("%s %d%s per process (rlimit)", name, v, unit)
	}
	e["cpu_time"] = per("RLIMIT_CPU", int64((r.CPU+999_999_999)/time.Second), "s")
	if r.CPU < 0 {
		e["cpu_time"] = "not limited"
	}
	e["address_space"] = per("RLIMIT_AS", r.AddressSpace, " bytes")
	e["file_size"] = per("RLIMIT_FSIZE", r.FileSize, " bytes")
	e["open_files"] = per("RLIMIT_NOFILE", int64(r.OpenFiles), "")
	cg := func(ctl, file string, v string, ok bool) (string, bool) {
		how, has := sb.cg.has(ctl)
		if !has || !ok {
			return "", false
		}
		if how == "cgroup v1" {
			file = map[string]string{"memory.max": "memory.limit_in_bytes", "cpu.max": "cpu.cfs_quota_us", "pids.max": "pids.max"}[file]
		}
		return fmt.Sprintf("%s %s=%s for the whole run", how, file, v), true
	}
	if s, ok := cg("memory", "memory.max", strconv.FormatInt(r.Memory, 10), r.Memory > 0); ok {
		e["memory"] = s
	} else {
		e["memory"] = "not limited per run (address space per process only)"
	}
	switch s, ok := cg("pids", "pids.max", strconv.Itoa(r.Processes), r.Processes > 0); {
	case ok:
		e["processes"] = s
	case sb.procs && r.Processes > 0:
		e["processes"] = fmt.Sprintf("RLIMIT_NPROC %d, shared by every run of uid %d", r.Processes, sb.uid)
	default:
		e["processes"] = "not limited"
	}
	quota := strconv.FormatInt(max(1000, int64(r.CPUs*100000)), 10)
	if how, ok := sb.cg.has("cpu"); ok && r.CPUs > 0 {
		file := "cpu.max=" + quota + " 100000"
		if how == "cgroup v1" {
			file = "cpu.cfs_quota_us=" + quota + " (period 100000)"
		}
		e["cpus"] = fmt.Sprintf("%s %s, %s CPUs for the whole run", how, file, strconv.FormatFloat(r.CPUs, 'g', -1, 64))
	} else {
		e["cpus"] = "not limited"
	}
	switch {
	case sb.tmpfsTmp() && sb.tmpSize > 0:
		e["tmp"] = fmt.Sprintf("private tmpfs /tmp of %d bytes, gone with the run", sb.tmpSize)
	case sb.tmpfsTmp():
		e["tmp"] = "private tmpfs /tmp, gone with the run (size not capped)"
	default:
		e["tmp"] = "private TMPDIR removed after the run (size not capped; file size per process)"
	}
	switch {
	case sb.cg != nil && sb.cg.v2 != "":
		e["descendants"] = "cgroup v2 leaf, cgroup.kill when the run ends"
	case sb.cg.usable():
		e["descendants"] = "cgroup members killed when the run ends"
	case sb.mode == ModeNamespaces || sb.mode == ModeBwrap:
		e["descendants"] = "PID namespace, ended with its init"
	default:
		e["descendants"] = "process group, and processes marked with TOOLD_RUN_ID (best effort)"
	}
	return e
}

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
			uid, gid := os.Getuid(), os.Getgid()
			attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
			// uid 0 inside, so the shim keeps its capabilities through its
			// execve; it drops them all before the command's (shim.go).
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
			cmd.Path, cmd.Args, cmd.Dir = "/proc/self/exe", sb.shimArgs(argv, dir, workspace), ""
		}
	case ModeBwrap:
		args := append([]string{sb.bwrap}, sb.bwrapArgs(argv[0], dir, workspace, tmp)...)
		cmd.Path, cmd.Args, cmd.Dir = sb.bwrap, append(append(args, "--"), argv...), ""
	}
	return cmd
}

// runPaths are the host paths a run sees in the minimal root, and which
// are read-only: the workspace, the read-only paths and the program when
// it is elsewhere.
func (sb *sandbox) runPaths(program, workspace string) ([]string, []bool) {
	paths, ro := []string{workspace}, []bool{!sb.writable}
	for _, p := range sb.roPaths {
		paths, ro = append(paths, p), append(ro, true)
	}
	if !underAny(program, append(append([]string{workspace}, sb.roPaths...), systemDirs...)) {
		paths, ro = append(paths, program), append(ro, true)
	}
	return paths, ro
}

// runMounts is what a run of the minimal root adds to it: its /tmp, the
// workspace, the read-only paths and the program when it is elsewhere.
func (sb *sandbox) runMounts(program, workspace string) (*callMounts, error) {
	if !sb.minimalRoot() || sb.userns {
		return nil, nil // the shim mounts them (shim.go)
	}
	trees, err := openTrees(sb.runPaths(program, workspace))
	if err != nil {
		return nil, err
	}
	return &callMounts{tmpSize: sb.tmpSize, trees: trees}, nil
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
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--perms", "1777")
	if sb.tmpSize > 0 {
		a = append(a, "--size", strconv.FormatInt(sb.tmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
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
	a = append(a, bind, workspace, workspace)
	if tmp != "/tmp" {
		a = append(a, "--bind", tmp, tmp) // the probe's host directory
	}
	return append(a, "--chdir", dir)
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
	mu        sync.Mutex // guards nsErr, bwrapErr, launchers and cg
	root      bool
	uid, gid  int
	workspace string
	bwrap     string
	nsErr     error // why namespaces cannot be used; nil when they can
	bwrapErr  error
	launchers map[Mode]*launcher
	cg        *cgroupHost
	cgOnce    sync.Once
}

// cgroups finds the host's cgroups on first use.
func (h *host) cgroups() *cgroupHost {
	h.cgOnce.Do(func() { h.cg = findCgroups() })
	return h.cg
}

// launcher returns the started launcher for a mode, starting it (and
// probing that a command really starts) on first use.
func (h *host) launcher(mode Mode) (*launcher, error) {
	if l, ok := h.launchers[mode]; ok {
		return l, nil
	}
	l, err := newLauncher(profile{mode: mode, drop: h.root && h.uid != 0, uid: h.uid, gid: h.gid,
		userns: mode == ModeNamespaces && !h.root})
	if err != nil {
		return nil, err
	}
	if err := h.probe(l, mode); err != nil {
		l.close()
		return nil, err
	}
	h.launchers[mode] = l
	return l, nil
}

// probe starts /bin/true the way commands will start, so an unusable mode
// fails at start-up with its reason rather than at the first call.
func (h *host) probe(l *launcher, mode Mode) error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	sb := &sandbox{mode: mode, bwrap: h.bwrap, userns: mode == ModeNamespaces && !h.root}
	tmp, err := os.MkdirTemp("", "toold-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := sb.command([]string{truePath}, "/", h.workspace, tmp, nil)
	out := &strings.Builder{}
	cmd.Stderr = out
	if err := l.start(cmd, runSetup{}); err != nil {
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
