package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// macOS's side of the platform seam (platform.go). Two modes: seatbelt
// (seatbelt.go: sandbox-exec with a profile made per run), which auto
// picks, and an explicit none. In both the program runs in its own process
// group (SIGTERM, then SIGKILL to the group at the deadline), as the run-as
// uid when toold is root, with the environment allow-list, a private
// TMPDIR, the output caps and its rlimits, which toold's own binary sets
// as a shim between the fork and the program (shim_darwin.go): Go's
// os/exec has no hook there, and setrlimit in toold would limit toold.

// osModes are the containment modes this OS provides.
var osModes = []Mode{ModeAuto, ModeNone, ModeSeatbelt}

// hasRlimits: the shim applies a run's rlimits.
const hasRlimits = true

// limitsAddressSpace: macOS does not enforce RLIMIT_AS (an alias of the
// RSS limit it ignores), and since macOS 12 setrlimit refuses it with
// EINVAL: the shim would fail every run it was given to. It is left out
// (darwinRlimits), and results say the address space is not limited.
const limitsAddressSpace = false

// groupOnly is how the descendants of a run end here: with its group, and
// those that left it by the run's marker at its end.
const groupOnly = "process group (SIGKILL to the group when the run ends), and processes that left it (setsid) found by TOOLD_RUN_ID at the end of the run (best effort: one that clears its environment escapes)"

// hostRlimits are macOS's: no RLIMIT_AS, and a run's process count counted
// from its uid's processes at its start (the shim adds them).
var hostRlimits = darwinRlimits

// platformHost is what toold learned of Seatbelt, once: whether
// sandbox-exec works here (not inside another sandbox), and the binary
// that is the rlimit shim; and toold's own ports (ProtectPorts), which
// every profile made from then on denies.
type platformHost struct {
	probed  bool
	seatErr error
	shim    string
	shimErr error
	ports   atomic.Pointer[[]int]
}

// resolve runs an explicit none, and seatbelt, which auto picks, when
// sandbox-exec works here; auto refuses otherwise, saying why.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeDarwin()
	l := &launcher{plat: &h.plat}
	switch {
	case want == ModeNone:
		return ModeNone, "", l, nil
	case h.plat.seatErr == nil && want == ModeAuto:
		return ModeSeatbelt, "auto: Seatbelt, macOS's sandbox", l, nil
	case h.plat.seatErr == nil:
		return ModeSeatbelt, "", l, nil
	case want == ModeAuto:
		return "", "", nil, fmt.Errorf("no sandbox works on this Mac (seatbelt: %v): to run programs without isolation "+
			"write `containment: none` explicitly (every call then says \"containment: none (not isolated)\")", h.plat.seatErr)
	}
	return "", "", nil, h.plat.seatErr
}

// probeDarwin finds the shim and runs sandbox-exec once with a profile
// that allows everything: inside another sandbox (an agent's own) it
// cannot apply one, and seatbelt then fails at start-up with the reason.
// h.mu is held.
func (h *host) probeDarwin() {
	if h.plat.probed {
		return
	}
	h.plat.probed = true
	if exe, err := os.Executable(); err != nil {
		h.plat.shimErr = err
	} else if h.plat.shim, err = filepath.EvalSymlinks(exe); err != nil {
		h.plat.shimErr = err
	}
	if err := executable(SeatbeltExec); err != nil {
		h.plat.seatErr = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, SeatbeltExec, "-p", "(version 1)\n(allow default)", "/usr/bin/true").CombinedOutput()
	if err != nil {
		h.plat.seatErr = fmt.Errorf("%s does not work here (inside another sandbox?): %v: %s", SeatbeltExec, err, strings.TrimSpace(string(out)))
	}
}

// ProtectPorts makes toold's listening ports unreachable to every program
// started from now on: each seatbelt profile denies them by port on every
// address, and a run of containment none is started under sandbox-exec
// with a profile that denies only them (seatbelt.go). Where sandbox-exec
// does not work it returns ErrNoPortGuard. A second call is refused.
func (l *Launcher) ProtectPorts(ports ...int) error {
	h := l.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeDarwin()
	if h.plat.seatErr != nil {
		return fmt.Errorf("%w: %v", ErrNoPortGuard, h.plat.seatErr)
	}
	own := slices.Clone(ports)
	if !h.plat.ports.CompareAndSwap(nil, &own) {
		return errors.New("ProtectPorts: the ports are protected already")
	}
	return nil
}

// ErrNoPortGuard says that toold's ports cannot be taken from its
// programs here: sandbox-exec does not work.
var ErrNoPortGuard = errors.New("no port guard: sandbox-exec does not work here")

// portsGuarded says whether runs of mode with or without the network are
// kept from toold's listeners: a seatbelt run without the network always;
// any other once ProtectPorts gave the ports and sandbox-exec works.
// h.mu is held.
func (h *host) portsGuarded(mode Mode, network bool) bool {
	return (mode == ModeSeatbelt && !network) || (h.plat.seatErr == nil && h.plat.ports.Load() != nil)
}

// platformSandbox is the shim that sets a sandbox's rlimits.
type platformSandbox struct {
	shim string
}

// finishPlatform hands the sandbox the shim that sets its rlimits; without
// one (toold's binary not found), the results say the rlimits do not hold.
// A run that shares toold's uid is limited to the uid's processes at its
// start plus its own limit (RLIMIT_NPROC counts the whole uid).
func (sb *sandbox) finishPlatform(h *host) {
	sb.plat.shim = h.plat.shim
	if sb.headroom && sb.lim.Processes > 0 {
		sb.enforced["processes"] = fmt.Sprintf("RLIMIT_NPROC of the uid's processes at the run's start + %d "+
			"(macOS counts every process of the uid: a bound on the run's growth, shared with the user's own new processes)", sb.lim.Processes)
	}
	switch {
	case sb.mode == ModeSeatbelt && sb.network:
		sb.enforced["network"] = "allowed, but not toold's own ports (denied by port on every address) and no unix socket but the run's own and unix_sockets"
	case sb.mode == ModeSeatbelt:
		sb.enforced["network"] = "denied (Seatbelt), unix sockets but the run's own and unix_sockets too"
	default:
		sb.enforced["network"] = "NOT isolated (containment none); toold's own ports denied when sandbox-exec works"
	}
	if h.plat.shimErr == nil {
		return
	}
	for _, k := range []string{"cpu_time", "address_space", "file_size", "open_files", "processes"} {
		if strings.Contains(sb.enforced[k], "RLIMIT_") {
			sb.enforced[k] = "not limited (toold's binary, the rlimit shim, was not found: " + h.plat.shimErr.Error() + ")"
		}
	}
}

// ownTemp does nothing more to a run's temporary directory than tempDir.
func (*sandbox) ownTemp(string) error { return nil }

// command is the run's exec.Cmd: seatbeltRun's argv (the shim, then
// sandbox-exec, then the program), its own process group, and the run-as
// uid when toold is root (set by the child before its exec).
func (sb *sandbox) command(argv []string, dir, workspace, tmp string, env []string) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if sb.drop {
		attr.Credential = &syscall.Credential{Uid: uint32(sb.uid), Gid: uint32(sb.gid)}
	}
	m := macHost{workspace: workspace, tmp: tmp, shim: sb.plat.shim, real: realPath, sandboxExec: sb.launcher.plat.seatErr == nil}
	if p := sb.launcher.plat.ports.Load(); p != nil {
		m.ports = *p
	}
	path, args := sb.seatbeltRun(argv, m)
	return &exec.Cmd{Path: path, Args: args, Dir: dir, Env: env, SysProcAttr: attr}
}

// realPath is p with its symbolic links followed as far as it exists
// (/var is /private/var to Seatbelt).
func realPath(p string) string {
	var rest []string
	for q := filepath.Clean(p); ; {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		} else if !errors.Is(err, os.ErrNotExist) {
			return p
		}
		parent := filepath.Dir(q)
		if parent == q {
			return p
		}
		rest, q = append([]string{filepath.Base(q)}, rest...), parent
	}
}

// launcher starts a run's command as it is: the shim and sandbox-exec do
// what a hook between fork and exec would. It reads what the host learned
// (probed before any launcher exists, ports set once).
type launcher struct {
	plat *platformHost
}

// runSetup is what prepareRun hands to start: nothing here.
type runSetup struct{}

// runCgroup is a run's resource group: none here.
type runCgroup struct{}

func (*runCgroup) remove()                              {}
func (*runCgroup) kill() bool                           { return true }
func (*launcher) start(cmd *exec.Cmd, _ runSetup) error { return cmd.Start() }
func (*launcher) close()                                {}
func (*Launcher) prepareRun(*sandbox, string, string, string) (runSetup, *runCgroup, func(), error) {
	return runSetup{}, nil, func() {}, nil
}

// sweeps: every run's escaped processes are looked for by its marker
// (sweep_darwin.go): neither Seatbelt nor none ends a process that left
// the group with setsid.
func (*sandbox) sweeps(*runCgroup) bool { return true }

// sweepAtEnd: at the end of every run, not only a signalled one: a
// program that called setsid and went on after its parent exited would
// otherwise keep the run's rights past the call.
const sweepAtEnd = true

// closePlatform: nothing of the host's to undo.
func (*host) closePlatform() {}
