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

	"golang.org/x/sys/windows"
)

// Windows's side of the platform seam (platform.go). Two modes: job
// (job.go: a Job Object per run, a restricted low-integrity token, labels),
// which auto picks, and an explicit none, where the program runs in a new
// process group with the environment allow-list, a private temporary
// directory and the output caps, and at the deadline only the process
// itself is ended (TerminateProcess).

// osModes are the containment modes this OS provides.
var osModes = []Mode{ModeAuto, ModeNone, ModeJob}

// hasRlimits: there are no rlimits here; a job's limits are its own
// (finishPlatform).
const hasRlimits = false

// limitsAddressSpace: no rlimits at all (the job's memory limit is its own).
const limitsAddressSpace = false

// groupOnly is how the descendants of a run of containment none end: they
// do not.
const groupOnly = "not tracked: only the program itself is ended (containment none)"

// tmpVars name the run's private temporary directory: Windows programs
// read TEMP and TMP.
var tmpVars = []string{"TMPDIR", "TEMP", "TMP"}

// DefaultPath is a program's PATH unless its sandbox sets one.
const DefaultPath = `C:\Windows\system32;C:\Windows;C:\Windows\System32\Wbem`

// platformHost holds the restricted token every job run starts with, made
// once, and the paths toold has labelled.
type platformHost struct {
	token    windows.Token
	tokenErr error
	labelled map[string]bool
}

// resolve runs an explicit none, and job, which auto picks, once its
// token and the labels its sandbox needs are in place.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	if want == ModeNone {
		return ModeNone, "", &launcher{}, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.plat.token == 0 && h.plat.tokenErr == nil {
		h.plat.token, h.plat.tokenErr = restrictedToken()
	}
	switch {
	case h.plat.tokenErr != nil && want == ModeAuto:
		return "", "", nil, fmt.Errorf("no sandbox works here (job: %v): to run programs without isolation write "+
			"`containment: none` explicitly (every call then says \"containment: none (not isolated)\")", h.plat.tokenErr)
	case h.plat.tokenErr != nil:
		return "", "", nil, h.plat.tokenErr
	case want == ModeAuto:
		return ModeJob, "auto: a Job Object, Windows's sandbox", &launcher{token: h.plat.token}, nil
	}
	return ModeJob, "", &launcher{token: h.plat.token}, nil
}

// finishPlatform says what a job enforces, and labels the workspace (when
// the sandbox writes it) and toold's own files once: a run's token is low
// integrity. A label that cannot be set is recorded as the failure of
// every run of the sandbox (start fails with it).
func (sb *sandbox) finishPlatform(h *host) {
	if sb.mode != ModeJob {
		return
	}
	sb.procs = sb.lim.Processes > 0
	for k, v := range jobEnforcement(sb.jobPlanFor(h.workspace, `%TEMP%`, runtime.NumCPU())) {
		sb.enforced[k] = v
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.plat.labelled == nil {
		h.plat.labelled = map[string]bool{}
	}
	for _, l := range sb.jobPlanFor(h.workspace, "", runtime.NumCPU()).Labels {
		if l.Path == "" || h.plat.labelled[l.Path] {
			continue
		}
		if _, err := os.Lstat(l.Path); err != nil {
			continue // nothing to label (no .git, a state directory not made yet)
		}
		if err := setLabel(l.Path, l.SDDL); err != nil {
			sb.plat.labelErr = fmt.Errorf("labelling %s (%s): %w", l.Path, l.Why, err)
			return
		}
		h.plat.labelled[l.Path] = true
	}
}

// jobEnforcement says, per limit, how a job holds a run to it.
func jobEnforcement(p jobPlan) map[string]string {
	e := map[string]string{"file_size": "not limited (no per-file limit under a Job Object)",
		"open_files":  "not limited (no handle limit under a Job Object)",
		"descendants": "the run's Job Object: every process it started ends with it (kill on close)"}
	set := func(key string, v int64, format string) {
		if v > 0 {
			e[key] = fmt.Sprintf(format, v)
		} else {
			e[key] = "not limited"
		}
	}
	set("memory", p.JobMemory, "Job Object JobMemoryLimit=%d bytes for the whole run")
	set("processes", int64(p.ActiveProcesses), "Job Object ActiveProcessLimit=%d for the whole run")
	set("address_space", p.ProcessMemory, "Job Object ProcessMemoryLimit=%d committed bytes per process")
	set("cpu_time", int64(p.ProcessTime.Seconds()), "Job Object PerProcessUserTimeLimit=%ds per process")
	set("cpus", int64(p.CPURate), "Job Object CPU rate hard cap %d/10000 of the machine")
	return e
}

// command is the run's exec.Cmd, in a process group of its own; under job,
// created suspended with the restricted token (launcher.start puts it in
// its job and resumes it). Windows needs SystemRoot in a program's
// environment (its loader and sockets read it), so it is passed on unless
// the sandbox sets it.
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
	if sb.mode == ModeJob {
		attr.CreationFlags |= windows.CREATE_SUSPENDED
		attr.Token = syscall.Token(sb.launcher.token)
	}
	return &exec.Cmd{Path: argv[0], Args: argv, Dir: dir, Env: env, SysProcAttr: attr}
}

// launcher starts a run's command; under job it holds the restricted
// token.
type launcher struct {
	token windows.Token
}

// runSetup is a job run's Job Object, made by prepareRun.
type runSetup struct {
	job *runCgroup
}

// start starts cmd; a job run is created suspended, put in its job and
// only then resumed. On error the process, if any, is ended (the caller
// reaps it).
func (*launcher) start(cmd *exec.Cmd, rs runSetup) error {
	if err := cmd.Start(); err != nil || rs.job == nil {
		return err
	}
	if err := rs.job.adopt(uint32(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

func (*launcher) close() {}

// prepareRun makes a job run's Job Object, with its limits, and labels its
// private temporary directory low integrity (the only place outside a
// writable workspace its token may write).
func (l *Launcher) prepareRun(sb *sandbox, _ string) (runSetup, *runCgroup, func(), error) {
	if sb.mode != ModeJob {
		return runSetup{}, nil, func() {}, nil
	}
	if sb.plat.labelErr != nil {
		return runSetup{}, nil, func() {}, sb.plat.labelErr
	}
	job, err := newJob(sb.jobPlanFor(l.host.workspace, "", runtime.NumCPU()))
	if err != nil {
		return runSetup{}, nil, func() {}, err
	}
	return runSetup{job: job}, job, func() {}, nil
}

// platformSandbox is why a job sandbox's runs cannot start: a label that
// could not be set.
type platformSandbox struct {
	labelErr error
}

// ownTemp labels a job run's private temporary directory writable by low
// integrity.
func (sb *sandbox) ownTemp(dir string) error {
	if sb.mode != ModeJob {
		return nil
	}
	return setLabel(dir, labelLowWritable)
}

// terminate ends the program: a console-less process has no polite signal
// here (a job run's tree ends with kill, through its job).
func (k *killer) terminate() { _ = k.proc.Kill() }

// killGroup ends the program; a job run's descendants end with its job
// (killer.kill ends the runCgroup too).
func (k *killer) killGroup() { _ = k.proc.Kill() }

// signalName: no signal ends a Windows process.
func signalName(s syscall.Signal) string { return s.String() }

// Shim returns at once: no OS but Linux and macOS re-runs toold as a shim.
func Shim() {}

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

// list: no rlimits here.
func (Rlimits) list(bool) []rlimit { return nil }
