package launch

import (
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The calls behind a Windows job run (job.go says what they make). Not run
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

// adopt puts the suspended process pid in the job, then resumes its one
// thread: nothing of the program runs outside the job.
func (j *runCgroup) adopt(pid uint32) error {
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return fmt.Errorf("opening the run's process: %w", err)
	}
	defer windows.CloseHandle(p)
	if err := windows.AssignProcessToJobObject(j.h, p); err != nil {
		return fmt.Errorf("putting the run in its Job Object: %w", err)
	}
	return resumeThreads(pid)
}

// resumeThreads resumes the threads of pid (a process created suspended
// has one): os/exec closes the thread handle CreateProcess returned.
func resumeThreads(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("listing the run's threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		t, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return fmt.Errorf("opening the run's thread: %w", err)
		}
		_, rerr := windows.ResumeThread(t)
		windows.CloseHandle(t)
		if rerr != nil {
			return fmt.Errorf("resuming the run: %w", rerr)
		}
		resumed++
	}
	if resumed == 0 {
		return fmt.Errorf("resuming the run: no thread of process %d found", pid)
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

// createRestrictedToken is advapi32's CreateRestrictedToken (x/sys has no
// wrapper).
var createRestrictedToken = windows.NewLazySystemDLL("advapi32.dll").NewProc("CreateRestrictedToken")

// Flags of CreateRestrictedToken.
const (
	disableMaxPrivilege = 0x1
	luaToken            = 0x4
)

// jobDenyOnlySIDs are jobDenyOnly's well-known SIDs.
var jobDenyOnlySIDs = []windows.WELL_KNOWN_SID_TYPE{windows.WinBuiltinAdministratorsSid,
	windows.WinBuiltinPowerUsersSid, windows.WinBuiltinBackupOperatorsSid, windows.WinLocalAccountAndAdministratorSid}

// restrictedToken is toold's token with every privilege removed but
// SeChangeNotifyPrivilege, the privileged groups for denial only, and low
// integrity: the token every job run starts with.
func restrictedToken() (windows.Token, error) {
	var own windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(),
		windows.TOKEN_DUPLICATE|windows.TOKEN_QUERY|windows.TOKEN_ASSIGN_PRIMARY|windows.TOKEN_ADJUST_DEFAULT, &own); err != nil {
		return 0, fmt.Errorf("job: opening toold's token: %w", err)
	}
	defer own.Close()
	var disable []windows.SIDAndAttributes
	for _, t := range jobDenyOnlySIDs {
		if sid, err := windows.CreateWellKnownSid(t); err == nil {
			disable = append(disable, windows.SIDAndAttributes{Sid: sid})
		}
	}
	var tok windows.Token
	r, _, err := createRestrictedToken.Call(uintptr(own), disableMaxPrivilege|luaToken,
		uintptr(len(disable)), uintptr(unsafe.Pointer(unsafe.SliceData(disable))), 0, 0, 0, 0, uintptr(unsafe.Pointer(&tok)))
	if r == 0 {
		return 0, fmt.Errorf("job: CreateRestrictedToken: %w", err)
	}
	low, err := windows.CreateWellKnownSid(windows.WinLowLabelSid)
	if err != nil {
		tok.Close()
		return 0, fmt.Errorf("job: the low integrity SID: %w", err)
	}
	tml := windows.Tokenmandatorylabel{Label: windows.SIDAndAttributes{Sid: low, Attributes: windows.SE_GROUP_INTEGRITY}}
	if err := windows.SetTokenInformation(tok, windows.TokenIntegrityLevel, (*byte)(unsafe.Pointer(&tml)), tml.Size()); err != nil {
		tok.Close()
		return 0, fmt.Errorf("job: lowering the token's integrity: %w", err)
	}
	return tok, nil
}

// setLabel sets the mandatory integrity label sddl ("S:(ML;...)") on path.
func setLabel(path, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return err
	}
	sacl, _, err := sd.SACL()
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.LABEL_SECURITY_INFORMATION, nil, nil, nil, sacl)
}
