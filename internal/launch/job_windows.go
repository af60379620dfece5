package launch

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The Job Object of a Windows job run (job.go says what it holds;
// appcontainer_windows.go creates the run's process inside it). Not run
// where this was written (no Windows machine): compiled and vetted by CI's
// GOOS=windows go vet.

// runCgroup is a job run's Job Object: killing it ends every process of
// the run, and so does closing it (kill on close).
type runCgroup struct {
	h windows.Handle
}

// newJob makes a Job Object with plan's limits.
func newJob(plan jobPlan) (*runCgroup, error) {
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("creating the run's Job Object: %w", err)
	}
	j := &runCgroup{h: h}
	if err := j.limit(plan); err != nil {
		j.remove()
		return nil, fmt.Errorf("limiting the run's Job Object: %w", err)
	}
	return j, nil
}

// jobUIFlags are jobUI's JOB_OBJECT_UILIMIT_* values.
var jobUIFlags = map[string]uint32{
	"DESKTOP": windows.JOB_OBJECT_UILIMIT_DESKTOP, "DISPLAYSETTINGS": windows.JOB_OBJECT_UILIMIT_DISPLAYSETTINGS,
	"EXITWINDOWS": windows.JOB_OBJECT_UILIMIT_EXITWINDOWS, "GLOBALATOMS": windows.JOB_OBJECT_UILIMIT_GLOBALATOMS,
	"HANDLES": windows.JOB_OBJECT_UILIMIT_HANDLES, "READCLIPBOARD": windows.JOB_OBJECT_UILIMIT_READCLIPBOARD,
	"SYSTEMPARAMETERS": windows.JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS, "WRITECLIPBOARD": windows.JOB_OBJECT_UILIMIT_WRITECLIPBOARD,
}

// cpuRateControl is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION (x/sys has no
// type for it): flags, then the rate in cycles per 10,000.
type cpuRateControl struct {
	ControlFlags uint32
	CPURate      uint32
}

const (
	jobCPURateEnable  = 0x1 // JOB_OBJECT_CPU_RATE_CONTROL_ENABLE
	jobCPURateHardCap = 0x4 // JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP
)

// limit sets plan's limits on the job.
func (j *runCgroup) limit(plan jobPlan) error {
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	b := &ext.BasicLimitInformation
	b.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
	if plan.ActiveProcesses > 0 {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		b.ActiveProcessLimit = uint32(plan.ActiveProcesses)
	}
	if plan.ProcessTime > 0 {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_PROCESS_TIME
		b.PerProcessUserTimeLimit = int64(plan.ProcessTime / (100 * time.Nanosecond)) // 100 ns ticks
	}
	if plan.JobMemory > 0 {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		ext.JobMemoryLimit = uintptr(plan.JobMemory)
	}
	if plan.ProcessMemory > 0 {
		b.LimitFlags |= windows.JOB_OBJECT_LIMIT_PROCESS_MEMORY
		ext.ProcessMemoryLimit = uintptr(plan.ProcessMemory)
	}
	if _, err := windows.SetInformationJobObject(j.h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext))); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	var ui windows.JOBOBJECT_BASIC_UI_RESTRICTIONS
	for _, name := range plan.UI {
		ui.UIRestrictionsClass |= jobUIFlags[name]
	}
	if _, err := windows.SetInformationJobObject(j.h, windows.JobObjectBasicUIRestrictions,
		uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui))); err != nil {
		return fmt.Errorf("UI restrictions: %w", err)
	}
	if plan.CPURate > 0 {
		rate := cpuRateControl{ControlFlags: jobCPURateEnable | jobCPURateHardCap, CPURate: plan.CPURate}
		if _, err := windows.SetInformationJobObject(j.h, windows.JobObjectCpuRateControlInformation,
			uintptr(unsafe.Pointer(&rate)), uint32(unsafe.Sizeof(rate))); err != nil {
			return fmt.Errorf("CPU rate: %w", err)
		}
	}
	return nil
}

// kill ends every process of the run.
func (j *runCgroup) kill() bool {
	if j == nil {
		return true
	}
	return windows.TerminateJobObject(j.h, 1) == nil
}

// remove closes the job, which ends whatever of the run is left.
func (j *runCgroup) remove() {
	if j != nil && j.h != 0 {
		_ = windows.CloseHandle(j.h)
		j.h = 0
	}
}
