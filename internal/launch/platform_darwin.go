package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// EINVAL: the shim would fail every run it was given to. It is left out,
// and results say the address space is not limited.
const limitsAddressSpace = false

// groupOnly is how the descendants of a run end here: with its group.
const groupOnly = "process group (SIGKILL to the group when the run ends; a program that calls setsid leaves it)"

// platformHost is what toold learned of Seatbelt, once: whether
// sandbox-exec works here (not inside another sandbox), and the binary
// that is the rlimit shim.
type platformHost struct {
	probed  bool
	seatErr error
	shim    string
	shimErr error
}

// resolve runs an explicit none, and seatbelt, which auto picks, when
// sandbox-exec works here; auto refuses otherwise, saying why.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeDarwin()
	switch {
	case want == ModeNone:
		return ModeNone, "", &launcher{}, nil
	case h.plat.seatErr == nil && want == ModeAuto:
		return ModeSeatbelt, "auto: Seatbelt, macOS's sandbox", &launcher{}, nil
	case h.plat.seatErr == nil:
		return ModeSeatbelt, "", &launcher{}, nil
	case want == ModeAuto:
		return "", "", nil, fmt.Errorf("no sandbox works on this Mac (seatbelt: %v): to run programs without isolation "+
			"write `containment: none` explicitly (every call then says \"containment: none (not isolated)\")", h.plat.seatErr)
	}
	return "", "", nil, h.plat.seatErr
}

// probeDarwin finds the shim and runs sandbox-exec once with a profile
// that allows everything: inside another sandbox (an agent's own) it
// cannot apply one, and seatbelt then fails at start-up with the reason.
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

// platformSandbox is the shim that sets a sandbox's rlimits.
type platformSandbox struct {
	shim string
}

// finishPlatform hands the sandbox the shim that sets its rlimits; without
// one (toold's binary not found), the results say the rlimits do not hold.
func (sb *sandbox) finishPlatform(h *host) {
	sb.plat.shim = h.plat.shim
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

// command is the run's exec.Cmd: under seatbelt, sandbox-exec with the
// run's profile in front of the program; with rlimits, toold's shim in
// front of that; its own process group, and the run-as uid when toold is
// root (set by the child before its exec).
func (sb *sandbox) command(argv []string, dir, workspace, tmp string, env []string) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if sb.drop {
		attr.Credential = &syscall.Credential{Uid: uint32(sb.uid), Gid: uint32(sb.gid)}
	}
	run := argv
	if sb.mode == ModeSeatbelt {
		p := sb.seatbeltPolicy(argv[0], workspace, tmp, realPath)
		run = append(append([]string{SeatbeltExec}, seatbeltArgs(p)...), argv...)
	}
	if len(sb.limits) > 0 && sb.plat.shim != "" {
		run = append([]string{sb.plat.shim, shimArg0, encodeRlimits(sb.limits), "--"}, run...)
		return &exec.Cmd{Path: run[0], Args: run[1:], Dir: dir, Env: env, SysProcAttr: attr}
	}
	return &exec.Cmd{Path: run[0], Args: run, Dir: dir, Env: env, SysProcAttr: attr}
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
// what a hook between fork and exec would.
type launcher struct{}

// runSetup is what prepareRun hands to start: nothing here.
type runSetup struct{}

// runCgroup is a run's resource group: none here.
type runCgroup struct{}

func (*runCgroup) remove()                              {}
func (*runCgroup) kill() bool                           { return true }
func (*launcher) start(cmd *exec.Cmd, _ runSetup) error { return cmd.Start() }
func (*launcher) close()                                {}
func (*Launcher) prepareRun(*sandbox, string) (runSetup, *runCgroup, func(), error) {
	return runSetup{}, nil, func() {}, nil
}
