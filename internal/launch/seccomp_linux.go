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
//   - every socket but those a run needs: unix, TCP and UDP over IPv4 and
//     IPv6, and netlink's route family (issue 38, finding 1: see "The
//     socket rules" below);
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
	seccompArg1Lo = 24
	seccompArg2Lo = 32
	x32SyscallBit = 0x40000000
)

// The socket rules (issue 38, finding 1). Landlock's port rule sees TCP
// only: a socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP) connected to
// toold's API past it. Rather than list protocols to refuse, the filter
// lists what a run needs and refuses the rest with EPERM:
//
//   - AF_UNIX, any type;
//   - AF_INET and AF_INET6: SOCK_STREAM with protocol 0 or IPPROTO_TCP,
//     SOCK_DGRAM with 0 or IPPROTO_UDP (SOCK_NONBLOCK and SOCK_CLOEXEC
//     allowed). So no MPTCP, SCTP, SMC over IPPROTO_SMC, UDP-Lite, raw or
//     ICMP (ping) sockets, no SOCK_SEQPACKET, SOCK_RAW or SOCK_PACKET;
//   - AF_NETLINK with NETLINK_ROUTE only (getaddrinfo's AI_ADDRCONFIG and
//     getifaddrs read it; bwrap sets up its loopback with it). What a
//     netlink message asks cannot be seen by a filter: a change of an
//     address or route needs CAP_NET_ADMIN over the network namespace,
//     which no run has, so the kernel keeps it read-only;
//   - socketpair: AF_UNIX only.
//
// Every other family (AF_PACKET, AF_VSOCK, AF_SMC, AF_ALG, AF_KEY,
// AF_TIPC, AF_XDP, Bluetooth, CAN, ...) is refused. The kernel reads the
// three arguments as int, so their low halves are what it uses.

// socketProtocols lists, per socket type of AF_INET and AF_INET6, the
// protocols allowed.
var socketProtocols = []struct{ typ, protos []uint32 }{
	{[]uint32{unix.SOCK_STREAM}, []uint32{0, unix.IPPROTO_TCP}},
	{[]uint32{unix.SOCK_DGRAM}, []uint32{0, unix.IPPROTO_UDP}},
}

// socketsDenied is what results say of the socket rules.
const socketsDenied = "sockets but unix, TCP, UDP and netlink route"

// sockTypeMask keeps a socket type without SOCK_NONBLOCK and SOCK_CLOEXEC
// (the kernel's SOCK_TYPE_MASK).
const sockTypeMask = 0xf

// Labels of the filter's programs: where a jump goes, resolved when the
// program is assembled.
const (
	toAllow = iota + 1
	toEPERM
	toENOSYS
	toFlags
	toSocket
	toSocketpair
	toInet
	toNetlink
	toStream // toStream+i: the protocols of socketProtocols[i]
)

// bpf assembles a classic BPF program whose jumps go to labels.
type bpf struct {
	insns  []bpfInsn
	labels map[int]int
}

type bpfInsn struct {
	unix.SockFilter
	jt, jf int // labels (0: the next instruction)
}

const (
	bpfLdW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfAnd  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfJa   = unix.BPF_JMP | unix.BPF_JA
	bpfRet  = unix.BPF_RET | unix.BPF_K
)

func (p *bpf) op(code uint16, k uint32, jt, jf int) {
	p.insns = append(p.insns, bpfInsn{SockFilter: unix.SockFilter{Code: code, K: k}, jt: jt, jf: jf})
}

// label marks the next instruction.
func (p *bpf) label(l int) {
	if p.labels == nil {
		p.labels = map[int]int{}
	}
	p.labels[l] = len(p.insns)
}

// load loads the 32-bit word at off of struct seccomp_data.
func (p *bpf) load(off uint32) { p.op(bpfLdW, off, 0, 0) }

// to jumps to l unconditionally.
func (p *bpf) to(l int) { p.op(bpfJa, 0, 0, 0); p.insns[len(p.insns)-1].jt = l }

// assemble resolves the labels.
func (p *bpf) assemble() ([]unix.SockFilter, error) {
	out := make([]unix.SockFilter, len(p.insns))
	for i, in := range p.insns {
		out[i] = in.SockFilter
		for n, label := range []int{in.jt, in.jf} {
			if label == 0 {
				continue
			}
			at, ok := p.labels[label]
			if !ok {
				return nil, fmt.Errorf("syscall filter: no label %d", label)
			}
			d := at - i - 1
			switch {
			case d < 0:
				return nil, fmt.Errorf("syscall filter: a jump back, to label %d", label)
			case in.Code == bpfJa:
				out[i].K = uint32(d) // ja takes K, and never the labels' bytes
			case d > 255:
				return nil, fmt.Errorf("syscall filter: jump of %d", d)
			case n == 0:
				out[i].Jt = uint8(d)
			default:
				out[i].Jf = uint8(d)
			}
		}
	}
	return out, nil
}

// prologue refuses every other ABI with ENOSYS (i386 and x32 on amd64:
// their numbers differ, and i386 has socketcall) and loads the syscall's
// number.
func (p *bpf) prologue(arch uint32) {
	p.load(seccompArch)
	p.op(bpfJeq, arch, 0, toENOSYS)
	p.load(seccompNr)
	if runtime.GOARCH == "amd64" {
		p.op(bpfJge, x32SyscallBit, toENOSYS, 0)
	}
}

// sockets sends socket and socketpair to their rules; anything else goes
// on to the next instruction.
func (p *bpf) sockets() {
	p.op(bpfJeq, unix.SYS_SOCKET, toSocket, 0)
	p.op(bpfJeq, unix.SYS_SOCKETPAIR, toSocketpair, 0)
}

// socketRules are the rules sockets jumps to (see the top of this
// section).
func (p *bpf) socketRules() {
	p.label(toSocket)
	p.load(seccompArg0Lo)
	p.op(bpfJeq, unix.AF_UNIX, toAllow, 0)
	p.op(bpfJeq, unix.AF_INET, toInet, 0)
	p.op(bpfJeq, unix.AF_INET6, toInet, 0)
	p.op(bpfJeq, unix.AF_NETLINK, toNetlink, toEPERM)
	p.label(toInet)
	p.load(seccompArg1Lo)
	p.op(bpfAnd, sockTypeMask, 0, 0)
	for i, sp := range socketProtocols {
		for _, typ := range sp.typ {
			p.op(bpfJeq, typ, toStream+i, 0)
		}
	}
	p.to(toEPERM)
	for i, sp := range socketProtocols {
		p.label(toStream + i)
		p.load(seccompArg2Lo)
		for _, proto := range sp.protos {
			p.op(bpfJeq, proto, toAllow, 0)
		}
		p.to(toEPERM)
	}
	p.label(toNetlink)
	p.load(seccompArg2Lo)
	p.op(bpfJeq, unix.NETLINK_ROUTE, toAllow, toEPERM)
	p.label(toSocketpair)
	p.load(seccompArg0Lo)
	p.op(bpfJeq, unix.AF_UNIX, toAllow, toEPERM)
}

// epilogue is the three returns.
func (p *bpf) epilogue() {
	p.label(toAllow)
	p.op(bpfRet, unix.SECCOMP_RET_ALLOW, 0, 0)
	p.label(toEPERM)
	p.op(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM), 0, 0)
	p.label(toENOSYS)
	p.op(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS), 0, 0)
}

// filterProgram is the filter's program (see the top of this file).
func filterProgram(forThread bool) ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	var p bpf
	p.prologue(arch)
	for _, nr := range filterDenied(forThread) {
		p.op(bpfJeq, nr, toEPERM, 0)
	}
	p.op(bpfJeq, unix.SYS_CLONE3, toENOSYS, 0)
	p.op(bpfJeq, unix.SYS_UNSHARE, toFlags, 0)
	p.op(bpfJeq, unix.SYS_CLONE, toFlags, 0)
	p.sockets()
	p.to(toAllow)
	// clone's and unshare's flags.
	p.label(toFlags)
	p.load(seccompArg0Lo)
	p.op(bpfJset, unix.CLONE_NEWUSER, toEPERM, toAllow)
	p.socketRules()
	p.epilogue()
	return p.assemble()
}

// portProgram is the filter the port guard adds (ports_linux.go) to every
// run, the ones without the syscall filter included (containment none,
// seccomp: false): the socket rules, so that every stream socket a run
// can open is one Landlock's TCP rule sees, and io_uring refused, whose
// IORING_OP_SOCKET makes a socket without the socket syscall. Other ABIs
// get ENOSYS, as in the filter: i386's socketcall would go around it.
func portProgram() ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	var p bpf
	p.prologue(arch)
	for _, nr := range []uintptr{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
		p.op(bpfJeq, uint32(nr), toEPERM, 0)
	}
	p.sockets()
	p.to(toAllow)
	p.socketRules()
	p.epilogue()
	return p.assemble()
}

// installFilter installs the filter on the calling thread (only: no
// TSYNC), which must be locked to its goroutine and have no_new_privs set
// (or CAP_SYS_ADMIN).
func installFilter(forThread bool) error {
	prog, err := filterProgram(forThread)
	if err != nil {
		return err
	}
	return install(prog)
}

// install installs prog on the calling thread (see installFilter).
func install(prog []unix.SockFilter) error {
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
		return "seccomp: nested user namespaces, mount and the mount API but move_mount and mount_setattr, bpf, perf_event_open, keyctl, io_uring, " + socketsDenied + " denied (setns, move_mount, mount_setattr need capabilities the command lacks)"
	case sb.filtered():
		return "seccomp: nested user namespaces, setns, mount and the mount API, bpf, perf_event_open, keyctl, io_uring, " + socketsDenied + " denied"
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
