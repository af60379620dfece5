package launch

import (
	"bytes"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// sweepMarked kills processes that left the run's process group (setsid)
// but still carry its TOOLD_RUN_ID: macOS has no cgroup or PID namespace
// to end them. It reads each candidate's arguments and environment with
// kern.procargs2 (which the runs themselves may not: seatbelt.go), among
// toold's uid's processes (all of them when toold is root, its run-as uid's
// included). Best effort: a process that cleared its environment escapes
// it, and so does one started between two passes of a fork loop after the
// third.
func (k *killer) sweepMarked() {
	marker := []byte("\x00TOOLD_RUN_ID=" + k.runID + "\x00")
	self := os.Getpid()
	for range 3 {
		procs, err := ownProcesses()
		if err != nil {
			return
		}
		found := false
		for _, p := range procs {
			pid := int(p.Proc.P_pid)
			if pid <= 1 || pid == self {
				continue
			}
			args, err := unix.SysctlRaw("kern.procargs2", pid)
			if err != nil || !bytes.Contains(args, marker) {
				continue
			}
			found = true
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// ownProcesses lists the processes toold may read the environment of:
// every one when it is root, else its uid's.
func ownProcesses() ([]unix.KinfoProc, error) {
	if os.Geteuid() == 0 {
		return unix.SysctlKinfoProcSlice("kern.proc.all")
	}
	return unix.SysctlKinfoProcSlice("kern.proc.uid", os.Getuid())
}

// uidProcesses counts the processes of uid (the rlimit shim's base for a
// process-count limit that counts from them).
func uidProcesses(uid int) (int, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.uid", uid)
	return len(procs), err
}
