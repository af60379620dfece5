package launch

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Windows's containment job: every run is an AppContainer of its own in a
// Job Object of its own.
//
// The AppContainer is the run's identity: a SID derived from the name
// toold.run.<run id>, different for every run. An AppContainer process
// opens a file only where the file's DACL grants its SID or one of the
// capabilities its token holds (beside the user's own check): the system's
// directories grant every AppContainer reading; the user's files,
// toold's state and other runs' TEMP grant none. toold grants:
//   - the run's own SID full control of its private TEMP, which is removed
//     with the run;
//   - one of three capabilities of this toold (random SIDs, made when the
//     Launcher is) reading the workspace, or writing it (modify without
//     FILE_DELETE_CHILD, so no entry of a directory is renamed or removed
//     but by its own DELETE right), or writing it .git included (a run of
//     git itself, as on Linux);
//   - the sandbox's own capability (a random SID per sandbox) reading its
//     read_only_paths and the program when nothing else lets it read it,
//     and connecting to its unix_sockets;
//   - and denies: the workspace-write capability may not write the
//     workspace's .git (an explicit deny ACE on the .git object, inherited
//     by what it holds, and DELETE denied on it, so it can be neither
//     written nor renamed away and replaced; a .git made again is found by
//     its file ID at the next run's start and denied too), and no
//     workspace capability may read or write toold's own files inside the
//     workspace (checked the same way at every run's start).
//
// The workspace and sandbox grants are put in place at a sandbox's first
// run and held while toold runs (propagating an ACE through a workspace
// costs a walk of it: a walk per run would be seconds); only this toold's
// runs carry those capabilities, and Launcher.Close revokes them. A run's
// network is its capabilities: none without the network (no loopback
// either); internetClient, internetClientServer and
// privateNetworkClientServer with it. Neither reaches an address of the
// machine itself: toold's listeners are out of every job run's reach.
//
// The Job Object holds the run's memory (all its processes together), its
// number of processes, its CPU rate, each process's CPU time and committed
// memory, forbids the desktop and clipboard (UI restrictions), and ends
// every process of the run when toold closes it (kill on close): at the
// deadline, at the output cap, and if toold dies. The program is created
// in the job (PROC_THREAD_ATTRIBUTE_JOB_LIST), suspended, and resumed once
// toold holds it.
//
// The plan is made here, by pure functions that platform_windows.go calls,
// so the tests pin on any OS what a run on Windows gets
// (testdata/job/*.golden); job_windows.go and appcontainer_windows.go turn
// it into calls.

// File access masks toold grants or denies (winnt.h).
const (
	accessRead    uint32 = 0x1200A9 // FILE_GENERIC_READ | FILE_GENERIC_EXECUTE
	accessModify  uint32 = 0x1301BF // read, write, execute and DELETE, not FILE_DELETE_CHILD, WRITE_DAC or WRITE_OWNER
	accessFull    uint32 = 0x1F01FF // FILE_ALL_ACCESS
	accessNoWrite uint32 = 0x0D0156 // denied: write data, append, write EA and attributes, delete child, DELETE, WRITE_DAC, WRITE_OWNER
	accessNoAny   uint32 = 0x1F01FF // denied: everything
)

// The trustees of a plan's grants: the run's own AppContainer SID, and
// toold's capabilities (appcontainer_windows.go makes their SIDs).
const (
	trusteeRun            = "the run's AppContainer"
	capWorkspaceRead      = "toold workspace read"
	capWorkspaceWrite     = "toold workspace write"
	capWorkspaceWriteGit  = "toold workspace write, .git included (git)"
	capSandbox            = "toold sandbox"
	capInternetClient     = "internetClient"
	capInternetServer     = "internetClientServer"
	capPrivateNetwork     = "privateNetworkClientServer"
	lifetimeRun           = "the run"
	lifetimeToold         = "toold (revoked at close)"
	lifetimeTooldRechecks = "toold, checked at every run's start"
)

// jobUI are the UI restrictions of every run's job (JOB_OBJECT_UILIMIT_*):
// a tool has no business with the user's desktop or clipboard.
var jobUI = []string{"DESKTOP", "DISPLAYSETTINGS", "EXITWINDOWS", "GLOBALATOMS", "HANDLES",
	"READCLIPBOARD", "SYSTEMPARAMETERS", "WRITECLIPBOARD"}

// jobDenyOnly are the groups the token a run's AppContainer is made from
// keeps only to deny: an elevated toold's Administrators, and the other
// built-in groups that grant privilege.
var jobDenyOnly = []string{"BUILTIN\\Administrators", "BUILTIN\\Power Users", "BUILTIN\\Backup Operators",
	"NT AUTHORITY\\Local account and member of Administrators group"}

// jobPlan is one run's Job Object, AppContainer, capabilities and grants.
type jobPlan struct {
	// Limits of JOBOBJECT_EXTENDED_LIMIT_INFORMATION; 0: not set.
	ActiveProcesses int
	JobMemory       int64         // bytes, every process of the run together
	ProcessMemory   int64         // committed bytes per process (address_space)
	ProcessTime     time.Duration // user-mode CPU time per process (cpu)
	// CPURate is the hard cap of JOBOBJECT_CPU_RATE_CONTROL_INFORMATION,
	// in cycles per 10,000 of the whole machine; 0: not set.
	CPURate uint32
	UI      []string
	// Container is the AppContainer's name, from which its SID derives.
	Container string
	// DenyOnly are the groups of the token the AppContainer is made from
	// that it keeps for denial only.
	DenyOnly []string
	// Capabilities are the capabilities the run's token holds.
	Capabilities []string
	// Grants are the ACEs in place for the run.
	Grants []jobGrant
}

// jobGrant is one ACE toold puts on a path for a run.
type jobGrant struct {
	Path     string
	Trustee  string // trusteeRun or a capability
	Deny     bool
	Access   uint32
	Inherit  bool   // inherited by what a directory holds (object and container inherit)
	Lifetime string // lifetimeRun, lifetimeToold or lifetimeTooldRechecks
	Why      string
}

// jobHost is what a Windows run's plan depends on beyond its sandbox: the
// workspace, the directories every AppContainer may read already (the
// system's: %SystemRoot%, %ProgramFiles%), and the machine's processors.
type jobHost struct {
	workspace string
	system    []string
	numCPU    int
}

// jobPlanFor is the plan of the run runID of program (absolute) under sb
// with its private temporary directory tmp.
func (sb *sandbox) jobPlanFor(program, runID, tmp string, h jobHost) jobPlan {
	r := sb.lim
	p := jobPlan{UI: jobUI, DenyOnly: jobDenyOnly, Container: "toold.run." + runID}
	if r.Processes > 0 {
		p.ActiveProcesses = r.Processes
	}
	p.JobMemory = max(r.Memory, 0)
	p.ProcessMemory = max(r.AddressSpace, 0)
	p.ProcessTime = max(r.CPU, 0)
	if r.CPUs > 0 && h.numCPU > 0 {
		p.CPURate = uint32(min(10000, max(1, int(r.CPUs*10000)/h.numCPU)))
	}
	ws := sb.workspaceCap(program)
	p.Capabilities = append(p.Capabilities, ws)
	if sb.network {
		p.Capabilities = append(p.Capabilities, capInternetClient, capInternetServer, capPrivateNetwork)
	}
	grant := func(path, trustee string, access uint32, inherit bool, life, why string) {
		p.Grants = append(p.Grants, jobGrant{Path: path, Trustee: trustee, Access: access, Inherit: inherit, Lifetime: life, Why: why})
	}
	deny := func(path, trustee string, access uint32, why string) {
		p.Grants = append(p.Grants, jobGrant{Path: path, Trustee: trustee, Deny: true, Access: access, Inherit: true,
			Lifetime: lifetimeTooldRechecks, Why: why})
	}
	grant(tmp, trusteeRun, accessFull, true, lifetimeRun, "the run's private TEMP: only this run's SID is granted it")
	switch ws {
	case capWorkspaceRead:
		grant(h.workspace, ws, accessRead, true, lifetimeToold, "the workspace, read-only")
	default:
		grant(h.workspace, ws, accessModify, true, lifetimeToold, "workspace_writable: the workspace, written but no entry renamed or removed by its parent's right")
	}
	if ws == capWorkspaceWrite {
		deny(winJoin(h.workspace, ".git"), ws, accessNoWrite, ".git is read-only to every run but git's (issue 24): denied on the object, so a rename carries the deny with it")
	}
	sbCap := false
	for _, d := range sb.roPaths {
		grant(d, capSandbox, accessRead, true, lifetimeToold, "read_only_paths")
		sbCap = true
	}
	for _, s := range sb.sockets {
		grant(s, capSandbox, accessModify, false, lifetimeToold, "unix_sockets: connecting needs write access to the socket")
		sbCap = true
	}
	readable := append(append([]string{h.workspace}, sb.roPaths...), h.system...)
	if !underAnyFold(program, readable) {
		grant(program, capSandbox, accessRead, false, lifetimeToold, "the program, which no other grant lets the run read")
		sbCap = true
	}
	if sbCap {
		p.Capabilities = append(p.Capabilities, capSandbox)
	}
	for _, f := range sb.private {
		if underAnyFold(f, []string{h.workspace}) {
			deny(f, ws, accessNoAny, "toold's own file inside the workspace: no run reads or writes it")
		}
	}
	return p
}

// workspaceCap is the workspace capability a run of program holds.
func (sb *sandbox) workspaceCap(program string) string {
	switch {
	case !sb.writable:
		return capWorkspaceRead
	case strings.EqualFold(strings.TrimSuffix(strings.ToLower(winBase(program)), ".exe"), "git"):
		return capWorkspaceWriteGit
	}
	return capWorkspaceWrite
}

// winBase and winJoin are filepath's Base and Join for Windows paths, on
// any OS (the plan is pure: the tests make Windows plans on Linux).
func winBase(p string) string {
	if i := strings.LastIndexAny(p, `\/`); i >= 0 {
		return p[i+1:]
	}
	return p
}

func winJoin(dir, name string) string { return strings.TrimRight(dir, `\/`) + `\` + name }

// underAnyFold says whether p is below one of dirs, Windows's way: case
// folded, either separator.
func underAnyFold(p string, dirs []string) bool {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, `\`, "/")) }
	for _, d := range dirs {
		if d != "" && strings.HasPrefix(norm(p), strings.TrimRight(norm(d), "/")+"/") {
			return true
		}
	}
	return false
}

// String is the plan as the golden files pin it.
func (p jobPlan) String() string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	set := func(v int64) string {
		if v <= 0 {
			return "not set"
		}
		return fmt.Sprint(v)
	}
	line("job object: kill on close, die on unhandled exception; the program created in it (PROC_THREAD_ATTRIBUTE_JOB_LIST), suspended, then resumed")
	line("  active processes: %s", set(int64(p.ActiveProcesses)))
	line("  job memory: %s", set(p.JobMemory))
	line("  process memory: %s", set(p.ProcessMemory))
	line("  process user time: %s", set(int64(p.ProcessTime/time.Millisecond)))
	line("  cpu rate hard cap (of 10000): %s", set(int64(p.CPURate)))
	line("  ui restrictions: %s", strings.Join(p.UI, " "))
	line("appcontainer: %s (its own SID, low integrity), no console of toold's (CREATE_NO_WINDOW)", p.Container)
	line("  made from toold's token restricted: all privileges removed but SeChangeNotifyPrivilege")
	line("  deny-only groups: %s", strings.Join(p.DenyOnly, "; "))
	line("  capabilities: %s", strings.Join(p.Capabilities, "; "))
	if slices.Contains(p.Capabilities, capInternetClient) {
		line("network: the internet and the local networks, no address of this machine (AppContainer loopback isolation)")
	} else {
		line("network: none (no network capability), loopback included")
	}
	line("grants:")
	for _, g := range p.Grants {
		kind, inherit := "allow", ""
		if g.Deny {
			kind = "deny"
		}
		if g.Inherit {
			inherit = ", inherited"
		}
		line("  %s %#07x to %s%s: %s", kind, g.Access, g.Trustee, inherit, g.Path)
		line("    held by: %s; %s", g.Lifetime, g.Why)
	}
	return b.String()
}
