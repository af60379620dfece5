package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// Windows's side of the platform seam (platform.go). Two modes: job
// (job.go: an AppContainer and a Job Object per run), which auto picks
// once a probe run shows AppContainers work here, and an explicit none,
// where the program runs in a new process group with the environment
// allow-list, a private temporary directory and the output caps, and at
// the deadline only the process itself is ended (TerminateProcess).

// osModes are the containment modes this OS provides.
var osModes = []Mode{ModeAuto, ModeNone, ModeJob}

// hostRlimits: none here (windowsRlimits); a job's limits are its own.
var hostRlimits = windowsRlimits

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

// platformHost is what toold learned of AppContainers, once, and the
// grants it made: the token runs are made from, this toold's workspace
// capabilities, and the grants Close revokes.
type platformHost struct {
	probed  bool
	err     error         // why job cannot run here
	base    windows.Token // the token each AppContainer is made from; 0: toold's own
	baseWhy string        // why not the restricted one, when so
	caps    map[string]*windows.SID

	gmu     sync.Mutex // guards granted and checked
	granted map[grantKey]*windows.SID
	checked map[grantKey][3]uint32
}

// grantKey is one path's ACEs for one SID.
type grantKey struct{ path, sid string }

// resolve runs an explicit none, and job, which auto picks, once a probe
// run of cmd.exe in an AppContainer answered.
func (h *host) resolve(want Mode) (Mode, string, *launcher, error) {
	if want == ModeNone {
		return ModeNone, "", &launcher{}, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeWindows()
	switch {
	case h.plat.err != nil && want == ModeAuto:
		return "", "", nil, fmt.Errorf("no sandbox works here (job: %v): to run programs without isolation write "+
			"`containment: none` explicitly (every call then says \"containment: none (not isolated)\")", h.plat.err)
	case h.plat.err != nil:
		return "", "", nil, h.plat.err
	case want == ModeAuto:
		return ModeJob, "auto: an AppContainer in a Job Object, Windows's sandbox", &launcher{plat: &h.plat}, nil
	}
	return ModeJob, "", &launcher{plat: &h.plat}, nil
}

// probeWindows makes this toold's workspace capabilities and the
// restricted token, and starts cmd.exe once as an AppContainer of each
// token it may use: the restricted one, else toold's own (an AppContainer
// made from it still holds no privilege and reaches only what is granted
// to it). Where neither starts, job is not available. h.mu is held.
func (h *host) probeWindows() {
	p := &h.plat
	if p.probed {
		return
	}
	p.probed = true
	p.caps = map[string]*windows.SID{}
	for _, c := range []string{capWorkspaceRead, capWorkspaceWrite, capWorkspaceWriteGit} {
		sid, err := newCapabilitySID()
		if err != nil {
			p.err = fmt.Errorf("making a capability: %w", err)
			return
		}
		p.caps[c] = sid
	}
	tok, err := restrictedToken()
	if err == nil {
		if err = probeContainer(tok); err == nil {
			p.base = tok
			return
		}
		tok.Close()
	}
	if err2 := probeContainer(0); err2 != nil {
		p.err = fmt.Errorf("an AppContainer did not start: %v (from the restricted token: %v)", err2, err)
		return
	}
	p.baseWhy = "made from toold's own token: the restricted one failed: " + err.Error()
}

// probeContainer starts cmd.exe /c exit 7 as an AppContainer with no
// capability in a Job Object, and wants 7 back within 10 s.
func probeContainer(base windows.Token) error {
	sid, err := containerSID("toold.probe." + newRunID())
	if err != nil {
		return err
	}
	job, err := newJob(jobPlan{})
	if err != nil {
		return err
	}
	defer job.remove()
	sys := os.Getenv("SystemRoot")
	if sys == "" {
		sys = `C:\Windows`
	}
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := &exec.Cmd{Path: filepath.Join(sys, "System32", "cmd.exe"), Args: []string{"cmd", "/c", "exit 7"},
		Dir: filepath.Join(sys, "System32"), Env: []string{"SystemRoot=" + sys}, Stdout: out, Stderr: out}
	if err := createInContainer(cmd, containerStart{base: base, container: sid, job: job.h}); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		job.kill()
		<-done
		return errors.New("the probe run did not end within 10 s")
	}
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		return fmt.Errorf("the probe run exited %d, not 7", code)
	}
	return nil
}

// portsGuarded is in ports_windows.go.

// platformSandbox is a job sandbox's own capability (its read-only paths,
// unix sockets and program are granted to it), or why it has none.
type platformSandbox struct {
	capSID *windows.SID
	err    error
}

// finishPlatform says what a job enforces, and makes the sandbox's own
// capability.
func (sb *sandbox) finishPlatform(h *host) {
	if sb.mode != ModeJob {
		if sb.mode == ModeNone {
			sb.enforced["network"] = "NOT isolated (containment none): toold's own ports too"
		}
		return
	}
	sb.procs = sb.lim.Processes > 0
	for k, v := range jobEnforcement(sb.jobPlanFor(`C:\program.exe`, "", `%TEMP%`, h.jobHost())) {
		sb.enforced[k] = v
	}
	if sb.network {
		sb.enforced["network"] = "AppContainer capabilities internetClient, internetClientServer, privateNetworkClientServer: no address of this machine (toold's ports included)"
	} else {
		sb.enforced["network"] = "none: an AppContainer without network capabilities (no loopback either)"
	}
	if h.plat.baseWhy != "" {
		sb.enforced["token"] = h.plat.baseWhy
	}
	sb.plat.capSID, sb.plat.err = newCapabilitySID()
}

// jobHost is the host's side of a run's plan.
func (h *host) jobHost() jobHost {
	var sys []string
	for _, v := range []string{"SystemRoot", "ProgramFiles", "ProgramFiles(x86)", "ProgramW6432"} {
		if d := os.Getenv(v); d != "" {
			sys = append(sys, d)
		}
	}
	return jobHost{workspace: h.workspace, system: sys, numCPU: runtime.NumCPU()}
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

// command is the run's exec.Cmd; a job run's is started by
// launcher.start as an AppContainer (createInContainer), none's by
// os/exec in a process group of its own. Windows needs SystemRoot in a
// program's environment (its loader and sockets read it), so it is passed
// on unless the sandbox sets it.
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

// launcher starts a run's command; under job it reads what the probe
// learned.
type launcher struct {
	plat *platformHost
}

// runSetup is a job run's Job Object and AppContainer, made by prepareRun.
type runSetup struct {
	job   *runCgroup
	start containerStart
}

// start starts cmd: a job run as an AppContainer inside its job, none's as
// os/exec does.
func (*launcher) start(cmd *exec.Cmd, rs runSetup) error {
	if rs.job == nil {
		return cmd.Start()
	}
	return createInContainer(cmd, rs.start)
}

func (*launcher) close() {}

// prepareRun makes a job run's AppContainer SID, puts its grants in place
// (the run's TEMP; the workspace's and the sandbox's once; the denies of
// .git and toold's own files whenever their file changed) and makes its
// Job Object.
func (l *Launcher) prepareRun(sb *sandbox, program, runID, tmp string) (runSetup, *runCgroup, func(), error) {
	none := func(err error) (runSetup, *runCgroup, func(), error) { return runSetup{}, nil, func() {}, err }
	if sb.mode != ModeJob {
		return none(nil)
	}
	if sb.plat.err != nil {
		return none(fmt.Errorf("the sandbox's capability: %w", sb.plat.err))
	}
	h := l.host
	plan := sb.jobPlanFor(program, runID, tmp, h.jobHost())
	sid, err := containerSID(plan.Container)
	if err != nil {
		return none(err)
	}
	trustee := func(name string) (*windows.SID, error) {
		switch {
		case name == trusteeRun:
			return sid, nil
		case name == capSandbox:
			return sb.plat.capSID, nil
		case h.plat.caps[name] != nil:
			return h.plat.caps[name], nil
		case networkCapSIDs[name] != "":
			return windows.StringToSid(networkCapSIDs[name])
		}
		return nil, fmt.Errorf("no SID for %q", name)
	}
	for _, g := range plan.Grants {
		t, err := trustee(g.Trustee)
		if err == nil {
			err = h.plat.apply(g, t, h.workspace)
		}
		if err != nil {
			return none(fmt.Errorf("granting the run %s: %w", g.Why, err))
		}
	}
	var caps []*windows.SID
	for _, c := range plan.Capabilities {
		t, err := trustee(c)
		if err != nil {
			return none(err)
		}
		caps = append(caps, t)
	}
	job, err := newJob(plan)
	if err != nil {
		return none(err)
	}
	return runSetup{job: job, start: containerStart{base: h.plat.base, container: sid, caps: caps, job: job.h}}, job, func() {}, nil
}

// apply puts one grant of a plan in place for sid: the run's own at once
// (its TEMP, removed with it), toold's once, the rechecked denies whenever
// the file at the path is not the one denied last.
func (p *platformHost) apply(g jobGrant, sid *windows.SID, workspace string) error {
	if g.Lifetime == lifetimeRun {
		return fileGrant(g.Path, sid, g)
	}
	path := g.Path
	if real, err := filepath.EvalSymlinks(path); err == nil && underAnyFold(real, []string{workspace}) {
		path = real // a .git that is a link inside the workspace: its target
	}
	if _, err := os.Lstat(path); err != nil {
		return nil // nothing there (a read-only path or socket not made, no .git)
	}
	p.gmu.Lock()
	defer p.gmu.Unlock()
	if p.granted == nil {
		p.granted, p.checked = map[grantKey]*windows.SID{}, map[grantKey][3]uint32{}
	}
	key := grantKey{path, sid.String()}
	if g.Lifetime == lifetimeTooldRechecks {
		id, ok := fileID(path)
		if prev, done := p.checked[key]; ok && done && prev == id {
			return nil
		}
		if err := fileGrant(path, sid, g); err != nil {
			return err
		}
		p.checked[key], p.granted[key] = id, sid
		return nil
	}
	if _, done := p.granted[key]; done {
		return nil
	}
	if err := fileGrant(path, sid, g); err != nil {
		return err
	}
	p.granted[key] = sid
	return nil
}

// closePlatform revokes the grants toold made and closes the token runs
// were made from. h.mu is held.
func (h *host) closePlatform() {
	p := &h.plat
	p.gmu.Lock()
	defer p.gmu.Unlock()
	for k, sid := range p.granted {
		_ = fileRevoke(k.path, sid)
	}
	p.granted, p.checked = nil, nil
	if p.base != 0 {
		p.base.Close()
		p.base = 0
	}
}

// ownTemp: a job run's TEMP is granted to its AppContainer in prepareRun.
func (*sandbox) ownTemp(string) error { return nil }

// sweeps: a job run's descendants end with its Job Object; none's are not
// tracked.
func (*sandbox) sweeps(*runCgroup) bool { return false }

// sweepAtEnd: nothing is swept here.
const sweepAtEnd = false

// sweepMarked: nothing is swept here.
func (*killer) sweepMarked() {}

// terminate ends the program: a console-less process has no polite signal
// here. A job run's whole tree ends through its job (its os.Process, found
// by pid, holds no right to terminate it: createInContainer).
func (k *killer) terminate() { k.killGroup() }

// killGroup ends the program; a job run's with every process of its job.
func (k *killer) killGroup() {
	if k.cg != nil {
		k.cg.kill()
		return
	}
	_ = k.proc.Kill()
}

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
