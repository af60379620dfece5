package launch

import (
	"fmt"
	"strings"
	"time"
)

// Windows's containment job: every run is its own Job Object, and its
// program is created suspended, put in the job, and only then resumed, so
// not one instruction of it runs outside the job. The job holds the run's
// memory (all its processes together), its number of processes, its CPU
// rate, each process's CPU time and committed memory, forbids the desktop
// and clipboard (UI restrictions), and ends every process of the run when
// toold closes it (kill on close): at the deadline, at the output cap, and
// if toold dies. The program runs on a restricted token: no privileges, the
// Administrators group for denial only, and low integrity, which may write
// only what is labelled low: the run's private temporary directory, and the
// workspace when the sandbox makes it writable (labelled low once, its .git
// kept at medium, so a run cannot write it); toold's own files get a label
// that forbids low-integrity reads too. A Job Object cannot take the
// network away: every result says so.
//
// The plan is made here, by pure functions, so the tests pin on any OS what
// a run on Windows gets (testdata/job/*.golden); platform_windows.go only
// turns it into calls.

// The integrity labels (SDDL mandatory-label ACEs, inherited by what a
// directory holds). Low integrity reads what is labelled medium (the
// default) unless NR is set, and writes only what is labelled low.
const (
	labelLowWritable  = "S:(ML;OICI;NW;;;LW)"   // low: a run may write it
	labelMediumNoLow  = "S:(ML;OICI;NW;;;ME)"   // medium: a run may read, not write
	labelMediumSealed = "S:(ML;OICI;NRNW;;;ME)" // medium: a run may neither read nor write
)

// jobUI are the UI restrictions of every run's job (JOB_OBJECT_UILIMIT_*):
// a tool has no business with the user's desktop or clipboard.
var jobUI = []string{"DESKTOP", "DISPLAYSETTINGS", "EXITWINDOWS", "GLOBALATOMS", "HANDLES",
	"READCLIPBOARD", "SYSTEMPARAMETERS", "WRITECLIPBOARD"}

// jobPlan is one run's Job Object, token and labels.
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
	// DenyOnly are the groups the token keeps for denial only.
	DenyOnly  []string
	Integrity string
	Labels    []jobLabel
}

// jobLabel is a mandatory integrity label toold sets on a path.
type jobLabel struct {
	Path, SDDL, Why string
}

// jobDenyOnly are the groups a run's token keeps only to deny: an elevated
// toold's Administrators, and the other built-in groups that grant
// privilege.
var jobDenyOnly = []string{"BUILTIN\\Administrators", "BUILTIN\\Power Users", "BUILTIN\\Backup Operators",
	"NT AUTHORITY\\Local account and member of Administrators group"}

// jobPlanFor is the plan of a run of sb in workspace with its private
// temporary directory tmp on a machine of numCPU processors.
func (sb *sandbox) jobPlanFor(workspace, tmp string, numCPU int) jobPlan {
	r := sb.lim
	p := jobPlan{UI: jobUI, DenyOnly: jobDenyOnly, Integrity: "low"}
	if r.Processes > 0 {
		p.ActiveProcesses = r.Processes
	}
	p.JobMemory = max(r.Memory, 0)
	p.ProcessMemory = max(r.AddressSpace, 0)
	p.ProcessTime = max(r.CPU, 0)
	if r.CPUs > 0 && numCPU > 0 {
		p.CPURate = uint32(min(10000, max(1, int(r.CPUs*10000)/numCPU)))
	}
	p.Labels = append(p.Labels, jobLabel{tmp, labelLowWritable, "the run's private temporary directory: the run writes it"})
	if sb.writable {
		p.Labels = append(p.Labels,
			jobLabel{workspace, labelLowWritable, "workspace_writable: the run writes the workspace (labelled once, and stays so)"},
			jobLabel{workspace + `\.git`, labelMediumNoLow, ".git is read-only to every run (issue 24)"})
	}
	for _, f := range sb.private {
		p.Labels = append(p.Labels, jobLabel{f, labelMediumSealed, "toold's own file: no run reads or writes it"})
	}
	return p
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
	line("job object: kill on close, die on unhandled exception, created suspended, assigned, then resumed")
	line("  active processes: %s", set(int64(p.ActiveProcesses)))
	line("  job memory: %s", set(p.JobMemory))
	line("  process memory: %s", set(p.ProcessMemory))
	line("  process user time: %s", set(int64(p.ProcessTime/time.Millisecond)))
	line("  cpu rate hard cap (of 10000): %s", set(int64(p.CPURate)))
	line("  ui restrictions: %s", strings.Join(p.UI, " "))
	line("token: restricted (all privileges removed but SeChangeNotifyPrivilege), integrity %s", p.Integrity)
	line("  deny-only groups: %s", strings.Join(p.DenyOnly, "; "))
	line("labels:")
	for _, l := range p.Labels {
		line("  %s %s  (%s)", l.SDDL, l.Path, l.Why)
	}
	line("network: not isolated (a Job Object cannot take it away)")
	return b.String()
}
