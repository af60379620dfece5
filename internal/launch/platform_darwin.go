package launch

import (
	"os/exec"
	"runtime"
	"syscall"
)

// macOS's side of the platform seam (platform.go). For now only an explicit
// `containment: none` runs: the program in its own process group (SIGTERM,
// then SIGKILL to the group at the deadline), as the run-as uid when toold
// is root, with the environment allow-list, a private TMPDIR and the output
// caps. auto and Linux's modes refuse (unsupported). The Seatbelt mode
// (sandbox-exec with a profile generated per run, issue 26) is added in
// resolve and command below, and in the mode lists of launch.go and
// config.go.

// groupOnly is how the descendants of a run end here: with its group.
const groupOnly = "process group (SIGKILL to the group when the run ends)"

// resolve runs an explicit none; every other mode is refused, naming the
// way out.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	if want == ModeNone {
		return ModeNone, "", &launcher{}, nil
	}
	return "", "", nil, unsupported(runtime.GOOS, want)
}

// command is the run's exec.Cmd: its own process group, and the run-as uid
// when toold is root (set by the child before its exec).
func (sb *sandbox) command(argv []string, dir, _, _ string, env []string) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if sb.drop {
		attr.Credential = &syscall.Credential{Uid: uint32(sb.uid), Gid: uint32(sb.gid)}
	}
	return &exec.Cmd{Path: argv[0], Args: argv, Dir: dir, Env: env, SysProcAttr: attr}
}

// launcher starts a run's command as it is: nothing needs a hook between
// fork and exec here yet.
type launcher struct{}

// runSetup is what prepareRun hands to start: nothing here yet.
type runSetup struct{}

func (*launcher) start(cmd *exec.Cmd, _ runSetup) error { return cmd.Start() }
func (*launcher) close()                                {}
