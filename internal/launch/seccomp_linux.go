package launch

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The syscall filter of namespaces and bwrap runs (issue 24, finding 8).
// Inside a run, `unshare -Urm` made a nested user namespace with every
// capability in it, and mounts in that: kernel code no sandboxed program
// needs, and where kernel bugs are found. A classic-BPF seccomp filter,
// built here for the machine's architecture (amd64 or arm64: the syscall
// numbers are golang.org/x/sys/unix's for the GOARCH toold is built for),
// answers EPERM to
//
//   - unshare and clone with CLONE_NEWUSER, and setns (joining another
//     namespace); clone3 answers ENOSYS, as where it does not exist, so
//     libc falls back to clone, whose flags the filter can read;
//   - mount, umount2, pivot_root and the new mount API (fsopen, fsconfig,
//     fsmount, fspick, open_tree, move_mount, mount_setattr);
//   - bpf, perf_event_open, keyctl, add_key, request_key, and io_uring_setup,
//     io_uring_enter, io_uring_register;
//
// and ENOSYS to every call of another ABI (i386, x32 on amd64), whose
// numbers differ. Everything else is allowed: the filter narrows, it
// does not list what programs may do.
//
// Where it is installed: bwrap gets it as --seccomp (a pipe per run) and
// installs it right before the command's exec; the shim of namespaces
// without root installs it right before its exec of the command; as root,
// the launcher thread of namespaces installs it on itself once its minimal
// root is built, and every child inherits it. That thread still makes each
// run's mount namespace, so its filter leaves it setns, move_mount and
// mount_setattr (the run's /tmp is a tmpfs made on toold's side and moved
// in): a command there runs as the run-as uid without any capability and
// cannot make a user namespace, so the kernel refuses those three anyway.
//
// A sandbox with `seccomp: false` runs without the filter (a program that
// needs io_uring or user namespaces); every result says which
// ("syscalls" in its limits).

// errNoFilter is an architecture the filter does not know.
var errNoFilter = fmt.Errorf("no syscall filter for %s (amd64 and arm64 only)", runtime.GOARCH)

// filterDenied are the syscalls denied outright; setns, move_mount and
// mount_setattr only when forThread is false.
func filterDenied(forThread bool) []uint32 {
	nrs := []uintptr{unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
		unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_OPEN_TREE, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER,
		unix.SYS_IO_URING_REGISTER}
	if !forThread {
		nrs = append(nrs, unix.SYS_SETNS, unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR)
	}
	out := make([]uint32, len(nrs))
	for i, n := range nrs {
		out[i] = uint32(n)
	}
	return out
}

// auditArch is the AUDIT_ARCH_* of the running architecture.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, errNoFilter
}

// Offsets in struct seccomp_data, and x86-64's x32 marker.
const (
	seccompNr     = 0
	seccompArch   = 4
	seccompArg0Lo = 16 // the low half of args[0] (little-endian: amd64, arm64)
	x32SyscallBit = 0x40000000
)

// filterProgram is the filter's program (see the top of this file).
func filterProgram(forThread bool) ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	// Jumps go to labels resolved at the end: the three returns and the
	// check of clone's and unshare's flags.
	const (
		toEPERM = iota + 1
		toENOSYS
		toFlags
	)
	type insn struct {
		unix.SockFilter
		jt, jf int // labels (0: the next instruction)
	}
	p := []insn{
		{SockFilter: unix.SockFilter{Code: ldW, K: seccompArch}},
		{SockFilter: unix.SockFilter{Code: jeq, K: arch}, jf: toENOSYS},
		{SockFilter: unix.SockFilter{Code: ldW, K: seccompNr}},
	}
	if runtime.GOARCH == "amd64" {
		p = append(p, insn{SockFilter: unix.SockFilter{Code: jge, K: x32SyscallBit}, jt: toENOSYS})
	}
	for _, nr := range filterDenied(forThread) {
		p = append(p, insn{SockFilter: unix.SockFilter{Code: jeq, K: nr}, jt: toEPERM})
	}
	p = append(p,
		insn{SockFilter: unix.SockFilter{Code: jeq, K: unix.SYS_CLONE3}, jt: toENOSYS},
		insn{SockFilter: unix.SockFilter{Code: jeq, K: unix.SYS_UNSHARE}, jt: toFlags},
		insn{SockFilter: unix.SockFilter{Code: jeq, K: unix.SYS_CLONE}, jt: toFlags},
		insn{SockFilter: unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}},
	)
	labels := map[int]int{toFlags: len(p)}
	p = append(p,
		insn{SockFilter: unix.SockFilter{Code: ldW, K: seccompArg0Lo}},
		insn{SockFilter: unix.SockFilter{Code: jset, K: unix.CLONE_NEWUSER}, jt: toEPERM},
		insn{SockFilter: unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}},
	)
	labels[toEPERM] = len(p)
	p = append(p, insn{SockFilter: unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}})
	labels[toENOSYS] = len(p)
	p = append(p, insn{SockFilter: unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}})
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		out[i] = in.SockFilter
		for _, j := range []struct {
			label int
			off   *uint8
		}{{in.jt, &out[i].Jt}, {in.jf, &out[i].Jf}} {
			if j.label != 0 {
				d := labels[j.label] - i - 1
				if d < 0 || d > 255 {
					return nil, fmt.Errorf("syscall filter: jump of %d", d)
				}
				*j.off = uint8(d)
			}
		}
	}
	return out, nil
}

// installFilter installs the filter on the calling thread (only: no
// TSYNC), which must be locked to its goroutine and have no_new_privs set
// (or CAP_SYS_ADMIN).
func installFilter(forThread bool) error {
	prog, err := filterProgram(forThread)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("installing the syscall filter: %w", e)
	}
	runtime.KeepAlive(prog)
	return nil
}

// filterPipe is the filter as bwrap's --seccomp reads it (struct
// sock_filter in the machine's byte order), in a pipe whose read end is
// returned; the caller closes it once the run started.
func filterPipe() (*os.File, error) {
	prog, err := filterProgram(false)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		buf = binary.NativeEndian.AppendUint16(buf, in.Code)
		buf = append(buf, in.Jt, in.Jf)
		buf = binary.NativeEndian.AppendUint32(buf, in.K)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(buf); err != nil { // a few hundred bytes: within the pipe's buffer
		r.Close()
		return nil, err
	}
	return r, nil
}

// filterFD is the descriptor bwrap reads the filter from: the first of
// the run's ExtraFiles (launcher.startRun adds it).
const filterFD = 3

// filtered says whether sb's runs get the filter.
func (sb *sandbox) filtered() bool {
	return sb.seccomp && (sb.mode == ModeNamespaces || sb.mode == ModeBwrap)
}

// syscallsEnforced is what every result says of the filter.
func (sb *sandbox) syscallsEnforced() string {
	switch {
	case sb.filtered() && sb.mode == ModeNamespaces && !sb.userns:
		return "seccomp: nested user namespaces, mount and the mount API but move_mount and mount_setattr, bpf, perf_event_open, keyctl, io_uring denied (setns, move_mount, mount_setattr need capabilities the command lacks)"
	case sb.filtered():
		return "seccomp: nested user namespaces, setns, mount and the mount API, bpf, perf_event_open, keyctl, io_uring denied"
	case sb.mode == ModeNone:
		return "not filtered (containment none)"
	}
	return "not filtered (seccomp: false)"
}

// applySeccomp settles the filter of a resolved sandbox: on unless the
// sandbox says seccomp: false; as root under namespaces the launcher
// thread is the filtered one or its unfiltered sibling.
func (sb *sandbox) applySeccomp(h *host, on bool) error {
	sb.seccomp = on
	if sb.filtered() {
		if _, err := auditArch(); err != nil {
			return fmt.Errorf("%w: set seccomp: false to run without it", err)
		}
	}
	if sb.mode == ModeNamespaces && !sb.userns && !on {
		l, err := h.unfilteredNamespaces()
		if err != nil {
			return err
		}
		sb.launcher = l
	}
	sb.enforced["syscalls"] = sb.syscallsEnforced()
	return nil
}
