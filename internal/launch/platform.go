package launch

// The platform seam. Everything above it — Launcher, Runner, Process,
// Sandbox, Result, the environment allow-list, the private temporary
// directory, pipes, output caps, deadlines and the escalation from
// terminate to kill — is the same on every OS. Below it, each OS provides,
// in files of its own (contain_linux.go, platform_darwin.go,
// platform_windows.go; what macOS and Windows both lack is in
// platform_other.go, what Linux and macOS share in *_unix.go):
//
//	func (h *host) resolve(want Mode) (Mode, string, *launcher, error)
//	    The containment of a sandbox: an explicit mode must work on this
//	    OS, or fail saying why; auto picks the OS's strongest sandbox or
//	    refuses (never none); the string says why auto chose. This is where
//	    a new mode is added (seatbelt on macOS, job on Windows).
//	func (sb *sandbox) command(argv []string, dir, workspace, tmp string, env []string) *exec.Cmd
//	    One run's exec.Cmd under sb.mode: a wrapper's argv (bwrap,
//	    sandbox-exec), the SysProcAttr (process group, namespaces, a
//	    uid), nothing else started.
//	func (l *Launcher) prepareRun(sb *sandbox, program, runID, tmp string) (runSetup, *runCgroup, func(), error)
//	    What a run needs made before its start (Linux: the minimal root's
//	    mounts, the run's cgroups; Windows: the run's AppContainer, its
//	    grants and its Job Object), handed to launcher.start.
//	type launcher; func (l *launcher) start(cmd *exec.Cmd, rs runSetup) error; func (l *launcher) close()
//	    Starts a run's command with rs in place (Linux: on a thread of the
//	    mode's, with rlimits and cgroups set before the first instruction;
//	    Windows: created suspended, put in its Job Object, then resumed).
//	func (k *killer) terminate(); func (k *killer) killGroup(); func (k *killer) sweepMarked()
//	func (sb *sandbox) sweeps(*runCgroup) bool; const sweepAtEnd
//	    Ask the run's tree to end, end it at once, and find what escaped
//	    the group (Linux: by its TOOLD_RUN_ID in /proc; macOS: in
//	    kern.procargs2, at the end of every run).
//	func (h *host) portsGuarded(Mode, bool) bool; func (l *Launcher) ProtectPorts(...int) error
//	    Whether a sandbox's runs are kept from toold's own listeners
//	    (Launcher.Exposed lists those that are not), and what ProtectPorts
//	    applies (Linux: Landlock; macOS: the profiles' port denies;
//	    Windows: nothing, AppContainers reach no address of the machine).
//	func (h *host) closePlatform()
//	    What Launcher.Close undoes (Windows: the grants toold made).
//	type cgroupHost, type runCgroup, func findCgroups() *cgroupHost
//	    Per-run resource groups (Linux: cgroups; Windows: the run's Job
//	    Object; macOS: none, its shim's rlimits only).
//	var hostRlimits; const hasRlimits
//	    The per-process limits this OS applies (rlimits.go's table);
//	    results say "not limited (no rlimits on OS)" where it applies none.
//	const groupOnly; var tmpVars; const DefaultPath; func candidates(string) []string; func executable(string) error
//	    How descendants end without cgroups or a PID namespace, which
//	    variables name the private temporary directory, the default PATH,
//	    and what an executable file is.
//	func signalName(syscall.Signal) string; func Shim()
//
// Every platform's files compile on every other's CI (GOOS=… go vet
// ./...), so a call that exists on one OS only cannot land above the seam.
