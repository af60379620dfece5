package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// Windows's side of the platform seam (platform.go). For now only an
// explicit `containment: none` runs: the program in a new process group,
// with the environment allow-list, a private temporary directory and the
// output caps; at the deadline the process itself is ended
// (TerminateProcess), not what it started. auto and Linux's modes refuse
// (unsupported). The Job Object mode (memory, process count, the whole
// tree ended with the job, issue 26) is added in resolve, command and
// launcher.start below (create the process suspended, assign it to the
// run's job, resume it), and in the mode lists of launch.go and config.go.

// groupOnly is how the descendants of a run end here: they do not.
const groupOnly = "not tracked: only the program itself is ended (no Job Object yet)"

// tmpVars name the run's private temporary directory: Windows programs
// read TEMP and TMP.
var tmpVars = []string{"TMPDIR", "TEMP", "TMP"}

// DefaultPath is a program's PATH unless its sandbox sets one.
const DefaultPath = `C:\Windows\system32;C:\Windows;C:\Windows\System32\Wbem`

// resolve runs an explicit none; every other mode is refused, naming the
// way out.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	if want == ModeNone {
		return ModeNone, "", &launcher{}, nil
	}
	return "", "", nil, unsupported(runtime.GOOS, want)
}

// command is the run's exec.Cmd, in a process group of its own. Windows
// needs SystemRoot in a program's environment (its loader and sockets
// read it), so it is passed on unless the sandbox sets it.
func (sb *sandbox) command(argv []string, dir, _, _ string, env []string) *exec.Cmd {
	for _, name := range []string{"SystemRoot", "SystemDrive", "windir"} {
		set := slices.ContainsFunc(env, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return strings.EqualFold(k, name) // names are case-insensitive here
		})
		if v, ok := os.LookupEnv(name); ok && !set {
			env = append(env, name+"="+v)
		}
	}
	attr := &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
	return &exec.Cmd{Path: argv[0], Args: argv, Dir: dir, Env: env, SysProcAttr: attr}
}

// launcher starts a run's command as it is.
type launcher struct{}

// runSetup is what prepareRun hands to start: nothing here yet.
type runSetup struct{}

func (*launcher) start(cmd *exec.Cmd, _ runSetup) error { return cmd.Start() }
func (*launcher) close()                                {}

// terminate ends the program: a console-less process has no polite signal
// here.
func (k *killer) terminate() { _ = k.proc.Kill() }

// killGroup ends the program (its descendants are not tracked yet).
func (k *killer) killGroup() { _ = k.proc.Kill() }

// signalName: no signal ends a Windows process.
func signalName(s syscall.Signal) string { return s.String() }

// candidates are the files a bare name may be in a directory: the name
// itself when it has an extension PATHEXT lists, else the name with each.
func candidates(p string) []string {
	exts := pathExt()
	if slices.Contains(exts, strings.ToLower(filepath.Ext(p))) {
		return []string{p}
	}
	out := make([]string, 0, len(exts))
	for _, e := range exts {
		out = append(out, p+e)
	}
	return out
}

// executable says why p cannot be run, if it cannot: it must be a file
// whose extension PATHEXT lists.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("program %s: %w", p, err)
	}
	if fi.IsDir() || !slices.Contains(pathExt(), strings.ToLower(filepath.Ext(p))) {
		return fmt.Errorf("program %s is not executable (its extension is not in PATHEXT)", p)
	}
	return nil
}

// pathExt is PATHEXT's extensions, lower-case, or Windows's default.
func pathExt() []string {
	var out []string
	for _, e := range strings.Split(strings.ToLower(os.Getenv("PATHEXT")), ";") {
		if strings.HasPrefix(e, ".") {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		out = []string{".com", ".exe", ".bat", ".cmd"}
	}
	return out
}
