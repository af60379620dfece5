package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// A launcher owns one OS thread from which every command of one containment
// profile is started. The thread is where toold's per-command setup lives,
// because Go's os/exec offers no hook between fork and exec:
//
//   - credentials: when toold is root, the thread itself switches to the
//     run-as uid/gid (setresuid on this thread only), so every child is born
//     unprivileged; for namespaces it keeps CAP_SYS_ADMIN in its effective
//     set to create the namespaces, a capability execve then drops;
//   - no_new_privs: set on the thread and inherited, so no command gains
//     privileges through a setuid binary (namespaces without root: set by
//     the shim, whose own exec must gain the namespace's capabilities);
//   - namespaces mode (root): the thread has a private mount namespace in
//     which it pivots into a minimal root (see root.go); for each run it
//     enters a fresh copy of it with the run's /tmp and paths, clones the
//     child (new PID, IPC, UTS and network namespaces) into it and goes
//     back. Unprivileged, the child gets a user namespace mapping toold's
//     uid (to 0) too, and runs toold's own binary as a shim that builds
//     the same root in it and execs the command (shim.go);
//   - cgroups: the stopped child (below) is moved into the run's cgroups
//     before its first instruction, through cgroup.procs files toold's
//     side opened (the kernel checks the opener's credentials);
//   - rlimits: a child is started under ptrace, so it stops right after its
//     execve, before running a single instruction of the program; the
//     thread (the tracer, which the kernel requires) sets its rlimits with
//     prlimit and detaches. prlimit on another process needs matching uids,
//     which holds because the thread runs as the child's uid. This costs
//     microseconds, where re-executing toold as a shim costs a Go runtime
//     start (~1.5 ms here) per command.
//
// The thread is locked and never unlocked: with its changed namespace and
// credentials it must not run other goroutines, and when the loop returns
// the Go runtime terminates it. Children have Pdeathsig SIGKILL, tied to
// this thread: closing the launcher (or toold dying) kills them.
type launcher struct {
	reqs chan func()
	stop chan struct{}
	done chan struct{}
	// retired, set on the thread, ends its loop after the current run:
	// the thread could not return to its namespace (see startRun).
	retired bool
	// Set by the thread before it is ready (minimal root only).
	rootDir string // the host directory the root was built at
	baseNS  int    // the thread's mount namespace, to come back to
	// userns is how children of namespaces without root are started and
	// mapped (shim_linux.go); nil for the other profiles.
	userns *usernsStart
}

// profile is what a launcher thread sets up.
type profile struct {
	mode     Mode
	drop     bool // switch to uid/gid (toold is root)
	uid, gid int
	userns   bool // namespaces without root: a user namespace per child
	filter   bool // the thread installs the syscall filter on itself (seccomp_linux.go)
}

// minimalRoot says whether the profile's thread pivots into a minimal root.
func (p profile) minimalRoot() bool { return p.mode == ModeNamespaces && !p.userns }

func newLauncher(p profile) (*launcher, error) {
	l := &launcher{reqs: make(chan func()), stop: make(chan struct{}), done: make(chan struct{}), baseNS: -1}
	if p.userns {
		u, err := newUsernsStart()
		if err != nil {
			return nil, err
		}
		l.userns = u
	}
	ready := make(chan error, 1)
	go l.loop(p, ready)
	if err := <-ready; err != nil {
		<-l.done
		l.userns.close()
		return nil, err
	}
	return l, nil
}

func (l *launcher) loop(p profile, ready chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread cannot be terminated, so it must not be changed:
		// hand over to a goroutine that cannot be scheduled here while
		// this one holds the thread, then give the thread back.
		locked := make(chan struct{})
		go l.serve(p, ready, locked)
		<-locked
		runtime.UnlockOSThread()
		return
	}
	l.serve(p, ready, nil)
}

func (l *launcher) serve(p profile, ready chan<- error, locked chan<- struct{}) {
	defer close(l.done)
	runtime.LockOSThread() // never unlocked, see the type's doc
	if locked != nil {
		close(locked)
	}
	if unix.Gettid() == unix.Getpid() {
		ready <- errors.New("launcher: landed on the main thread")
		return
	}
	if err := l.prepareThread(p); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-l.reqs:
			f()
			if l.retired {
				return
			}
		case <-l.stop:
			return
		}
	}
}

// close ends the thread; commands still running get SIGKILL.
func (l *launcher) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	l.userns.close()
	if l.baseNS >= 0 {
		_ = unix.Close(l.baseNS)
		l.baseNS = -1
	}
	if l.rootDir != "" {
		// Only the thread's namespace had the tmpfs on it: on the host it
		// is an empty directory.
		_ = os.Remove(l.rootDir)
		l.rootDir = ""
	}
}

// runSetup is what a run gets on top of its exec.Cmd.
type runSetup struct {
	limits  []rlimit
	mounts  *callMounts // minimal root: the run's /tmp and paths
	cgProcs []int       // the run's cgroup.procs files, opened by toold
	filter  *os.File    // bwrap: the syscall filter, read by bwrap as fd 3
	// atStop runs while the child is stopped after its exec, its limits
	// set (the egress proxy's listener of namespaces as root).
	atStop func(pid int) error
}

// start starts cmd on the launcher's thread. On error cmd.Process may be
// set (the child was killed): the caller reaps it.
func (l *launcher) start(cmd *exec.Cmd, rs runSetup) error {
	return l.do(func() error { return l.startRun(cmd, rs) })
}

// do runs f on the launcher's thread.
func (l *launcher) do(f func() error) error {
	errc := make(chan error, 1)
	select {
	case l.reqs <- func() { errc <- f() }:
		return <-errc
	case <-l.stop:
		return errClosed
	case <-l.done: // retired: nothing serves requests any more
		return errRetired
	}
}

// startRun runs on the thread: the run's mount namespace (minimal root),
// the child, and back.
func (l *launcher) startRun(cmd *exec.Cmd, rs runSetup) error {
	if rs.filter != nil {
		// filterFD: the first; an egress helper's descriptors follow it.
		cmd.ExtraFiles = append([]*os.File{rs.filter}, cmd.ExtraFiles...)
	}
	if l.baseNS < 0 {
		return startStopped(cmd, rs, l.userns)
	}
	cm := rs.mounts
	if cm == nil {
		cm = &callMounts{}
	}
	if err := enterRun(l.baseNS, cm); err != nil {
		return err
	}
	err := startStopped(cmd, rs, nil)
	if lerr := leaveRun(l.baseNS); lerr != nil {
		// The thread cannot serve another run from the wrong namespace:
		// it is retired (its loop ends and the runtime ends it, and with
		// it, by Pdeathsig, the commands it started, this one included),
		// and every later run is refused with errRetired — toold goes on.
		l.retired = true
		return errors.Join(errRetired, lerr)
	}
	return err
}

// leaveRun is swapped by the tests that make it fail.
var leaveRun = leaveRunNS

// startStopped starts cmd traced, and while it is stopped after its
// execve gives it its user namespace's maps (u, when not nil), its cgroups
// and its rlimits.
func startStopped(cmd *exec.Cmd, rs runSetup, u *usernsStart) error {
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the exec stop: %w", err)
		}
		break
	}
	if !ws.Stopped() {
		// Killed before its first instruction; already reaped by Wait4.
		cmd.Process = nil
		return fmt.Errorf("the command ended before it started (%v)", ws)
	}
	if err := u.mapIDs(pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		_ = unix.PtraceDetach(pid)
		return err
	}
	if err := place(rs.cgProcs, pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		_ = unix.PtraceDetach(pid)
		return err
	}
	for _, r := range rs.limits {
		v := unix.Rlimit{Cur: r.cur, Max: r.max}
		if err := unix.Prlimit(pid, r.resource, &v, nil); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			_ = unix.PtraceDetach(pid)
			return fmt.Errorf("setting %s: %w", r.name, err)
		}
	}
	if rs.atStop != nil {
		if err := rs.atStop(pid); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			_ = unix.PtraceDetach(pid)
			return err
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return fmt.Errorf("releasing the command: %w", err)
	}
	return nil
}

// prepareThread runs on the locked thread, once.
func (l *launcher) prepareThread(p profile) error {
	if p.minimalRoot() {
		if err := privateMounts(); err != nil {
			return err
		}
		owner, group := os.Getuid(), os.Getgid()
		if p.drop {
			owner, group = p.uid, p.gid
		}
		dir, err := buildRoot(owner, group)
		l.rootDir = dir
		if err != nil {
			return fmt.Errorf("building the minimal root: %w", err)
		}
		if l.baseNS, err = openOwnMountNS(); err != nil {
			return err
		}
	}
	if p.drop {
		if err := dropCredentials(p.uid, p.gid, p.minimalRoot()); err != nil {
			return err
		}
	}
	if p.userns {
		// The shim sets it for the command: set here, it would keep the
		// shim's exec from gaining the namespace's capabilities.
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if p.filter {
		// Last: the root is built, and what the thread still does for a
		// run (unshare, move_mount, mount_setattr, setns) is allowed.
		return installFilter(true)
	}
	return nil
}

func privateMounts() error {
	// CLONE_FS comes with CLONE_NEWNS: the thread stops sharing its root
	// and cwd with the rest of toold, which then never sees these mounts.
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return fmt.Errorf("unsharing the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	return nil
}

// dropCredentials changes this thread's credentials only: the raw
// syscalls, unlike syscall.Setuid, do not touch toold's other threads.
// keepSysAdmin keeps CAP_SYS_ADMIN (namespaces, mounts) and CAP_SYS_CHROOT
// (setns back to the minimal root), which a child's execve drops.
func dropCredentials(uid, gid int, keepSysAdmin bool) error {
	if keepSysAdmin {
		if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("keepcaps: %w", err)
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	if !keepSysAdmin {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[0].Effective = 1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_SYS_CHROOT
	data[0].Permitted = 1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_SYS_CHROOT
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
