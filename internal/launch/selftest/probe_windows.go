package selftest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// startDetached starts cmd detached from the run's console and process
// group, asking to leave its Job Object (CREATE_BREAKAWAY_FROM_JOB, which
// a job that does not allow it refuses: then without).
func startDetached(cmd *exec.Cmd) error {
	flags := uint32(windows.DETACHED_PROCESS | windows.CREATE_NEW_PROCESS_GROUP)
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags | windows.CREATE_BREAKAWAY_FROM_JOB}
	if err := cmd.Start(); err == nil {
		return nil
	}
	retry := exec.Command(cmd.Path, cmd.Args[1:]...)
	retry.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags}
	if err := retry.Start(); err != nil {
		return err
	}
	*cmd = *retry
	return nil
}

// scanEnvironments opens, for reading its memory (where its environment
// is), every other process that runs the probe's binary: another run's.
// It returns which it could open, or "".
func scanEnvironments(string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return "", fmt.Errorf("listing processes: %w", err)
	}
	defer windows.CloseHandle(snap)
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		name := windows.UTF16ToString(pe.ExeFile[:])
		if pe.ProcessID == uint32(os.Getpid()) || !strings.EqualFold(name, filepath.Base(exe)) {
			continue
		}
		h, err := windows.OpenProcess(windows.PROCESS_VM_READ|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pe.ProcessID)
		if err == nil {
			windows.CloseHandle(h)
			return fmt.Sprintf("process %d (%s), opened to read its memory", pe.ProcessID, name), nil
		}
	}
	return "", nil
}
