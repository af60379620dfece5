package launch

import (
	"encoding/binary"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	xbpf "golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSyscallFilter: issue 24, finding 8. Inside a namespaces or bwrap
// run, `unshare -Urm true` made a nested user namespace with every
// capability, and mounts in it. With the filter (the default) it fails,
// and so do the other denied calls a shell can reach; the run itself
// works, forks (clone without CLONE_NEWUSER) and says the filter in its
// limits. With seccomp: false no filter is installed, a nested user
// namespace is made again (as on the code before the filter), and the
// result says that no filter held.
func TestSyscallFilter(t *testing.T) {
	off := false
	for _, m := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(m), func(t *testing.T) {
			r := sandboxed(t, m, Config{}, Sandbox{})
			for _, argv := range [][]string{
				{"unshare", "-Urm", "true"},
				{"unshare", "-U", "true"},
				{"unshare", "-m", "true"},
				{"sh", "-c", "exec unshare -Ur sh -c 'mount -t tmpfs none /tmp'"},
			} {
				res, err := runFor(t, r, 20*time.Second, append([]string{"/usr/bin/env"}, argv...)...)
				if err != nil {
					t.Fatal(err)
				}
				if res.OK || !strings.Contains(res.Stderr, "unshare failed: Operation not permitted") {
					t.Errorf("%q ran inside a %s run: ok %v, stderr %q", argv, m, res.OK, res.Stderr)
				}
			}
			res, err := runFor(t, r, 20*time.Second, "/bin/sh", "-c", "echo $(echo forked) && cat /proc/self/status | grep ^Seccomp:")
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || !strings.Contains(res.Stdout, "forked") || !strings.Contains(res.Stdout, "Seccomp:\t2") {
				t.Errorf("a filtered run: ok %v, stdout %q, stderr %q", res.OK, res.Stdout, res.Stderr)
			}
			if !strings.HasPrefix(res.Limits["syscalls"], "seccomp: nested user namespaces") {
				t.Errorf("limits say %q", res.Limits["syscalls"])
			}

			r = sandboxed(t, m, Config{}, Sandbox{Seccomp: &off})
			res, err = runFor(t, r, 20*time.Second, "/bin/sh", "-c", "grep ^Seccomp: /proc/self/status; unshare -U true")
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || !strings.Contains(res.Stdout, "Seccomp:\t0") || res.Limits["syscalls"] != "not filtered (seccomp: false)" {
				t.Errorf("seccomp: false: ok %v, stdout %q, stderr %q, limits say %q", res.OK, res.Stdout, res.Stderr, res.Limits["syscalls"])
			}
		})
	}
}

// TestFilterProgram: every jump of the program lands inside it, the
// thread's variant lets the launcher thread make a run's namespace, and
// the program for this architecture is what bwrap reads.
func TestFilterProgram(t *testing.T) {
	for _, thread := range []bool{false, true} {
		prog, err := filterProgram(thread)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range prog {
			if in.Code&0x07 == unix.BPF_JMP && (i+1+int(in.Jt) >= len(prog) || i+1+int(in.Jf) >= len(prog)) {
				t.Errorf("instruction %d jumps out of the program", i)
			}
		}
		denied := filterDenied(thread)
		for _, nr := range []uint32{unix.SYS_SETNS, unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR} {
			has := false
			for _, d := range denied {
				has = has || d == nr
			}
			if has == thread {
				t.Errorf("thread %v: syscall %d denied %v", thread, nr, has)
			}
		}
	}
	f, err := filterPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf [4096]byte
	n, _ := f.Read(buf[:])
	prog, _ := filterProgram(false)
	if n != 8*len(prog) {
		t.Errorf("the pipe holds %d bytes for %d instructions", n, len(prog))
	}
}

// Protocol and family numbers x/sys does not name, or names only on some
// architectures.
const (
	ipprotoMPTCP  = 262
	ipprotoSMC    = 256
	ipprotoSCTP   = 132
	ipprotoUDPLit = 136
	afSMC         = 43
	sockPacket    = 10 // SOCK_PACKET
)

// mptcpEnabled says whether this kernel makes MPTCP sockets.
func mptcpEnabled() bool {
	b, err := os.ReadFile("/proc/sys/net/mptcp/enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// TestSocketFilter: issue 38, finding 1. A networked run opened
// socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP), which Landlock's TCP rule
// does not see, and reached toold's API with it. The filter allows the
// sockets a run needs (unix, TCP and UDP over IPv4 and IPv6, netlink's
// route family; socketpair of unix) and refuses every other with EPERM,
// MPTCP, SCTP, SMC, UDP-Lite, ping, raw, packet, vsock, AF_ALG and the
// other netlink families among them. With seccomp: false the same calls
// that the kernel allows (MPTCP, UDP-Lite, AF_ALG, sock_diag) succeed:
// the filter is what refuses them. (No ports are protected here: the
// port guard's rules are TestProtectedPortsAreOutOfReach's.)
func TestSocketFilter(t *testing.T) {
	flags := unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	s := func(f, typ, p int) sockCase { return sockCase{call: "socket", family: f, typ: typ, prot: p} }
	allowed := []sockCase{
		s(unix.AF_UNIX, unix.SOCK_STREAM, 0),
		s(unix.AF_UNIX, unix.SOCK_DGRAM, 0),
		s(unix.AF_UNIX, unix.SOCK_SEQPACKET|flags, 0),
		s(unix.AF_INET, unix.SOCK_STREAM, 0),
		s(unix.AF_INET, unix.SOCK_STREAM|flags, unix.IPPROTO_TCP),
		s(unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP),
		s(unix.AF_INET, unix.SOCK_DGRAM, 0),
		s(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP),
		s(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP),
		s(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE),
		s(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_ROUTE),
		{call: "socketpair", family: unix.AF_UNIX, typ: unix.SOCK_STREAM},
	}
	// The kernel would not answer these with EPERM (it makes them where
	// it has them, as MPTCP here): only the filter does.
	filterOnly := []sockCase{
		s(unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP),
		s(unix.AF_INET6, unix.SOCK_STREAM|flags, ipprotoMPTCP),
		s(unix.AF_INET, unix.SOCK_DGRAM, ipprotoUDPLit),
		s(unix.AF_INET, unix.SOCK_SEQPACKET, ipprotoSCTP),
		s(unix.AF_INET, unix.SOCK_STREAM, ipprotoSMC),
		s(unix.AF_ALG, unix.SOCK_SEQPACKET, 0),
		s(unix.AF_VSOCK, unix.SOCK_STREAM, 0),
		s(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG),
		{call: "socketpair", family: unix.AF_INET, typ: unix.SOCK_STREAM},
	}
	refused := append([]sockCase{
		s(unix.AF_INET6, unix.SOCK_STREAM, ipprotoSCTP),
		s(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP),
		s(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6),
		s(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_TCP),
		s(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_UDP),
		s(unix.AF_INET, sockPacket, 0),
		s(unix.AF_PACKET, unix.SOCK_RAW, 0),
		s(afSMC, unix.SOCK_STREAM, 0),
		s(unix.AF_KEY, unix.SOCK_RAW, 2),
		s(unix.AF_TIPC, unix.SOCK_RDM, 0),
		s(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT),
		s(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT),
		s(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC),
		{call: "socketpair", family: unix.AF_TIPC, typ: unix.SOCK_SEQPACKET},
	}, filterOnly...)
	off := false
	for _, m := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(m), func(t *testing.T) {
			r := sandboxed(t, m, Config{}, Sandbox{Network: NetworkOn()})
			got := probeSockets(t, r, append(allowed, refused...))
			for i, c := range allowed {
				if got[i] != "ok" {
					t.Errorf("%v: %s, want it allowed", c, got[i])
				}
			}
			for i, c := range refused {
				if g := got[len(allowed)+i]; g != c.call+" errno 1" {
					t.Errorf("%v: %s, want EPERM", c, g)
				}
			}
			r = sandboxed(t, m, Config{}, Sandbox{Network: NetworkOn(), Seccomp: &off})
			got = probeSockets(t, r, filterOnly)
			for i, g := range got {
				if strings.HasSuffix(g, " errno 1") {
					t.Errorf("seccomp: false, %v: %s, want the kernel's own answer", filterOnly[i], g)
				}
			}
			if got[0] != "ok" && mptcpEnabled() {
				t.Errorf("seccomp: false: no MPTCP socket (%s), though the kernel has MPTCP", got[0])
			}
		})
	}
}

// TestFilterDecisions runs the programs in x/net's BPF machine (an
// interpreter written apart from this package's assembler) on the
// struct seccomp_data of syscalls: each program answers as documented,
// for the sockets case by case, and every jump lands inside it.
func TestFilterDecisions(t *testing.T) {
	arch, err := auditArch()
	if err != nil {
		t.Skip(err)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosy = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	type call struct {
		name string
		arch uint32
		nr   uint32
		args [3]uint64
	}
	sock := func(f, typ, p uint64) [3]uint64 { return [3]uint64{f, typ, p} }
	flags := uint64(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC)
	cases := []struct {
		call
		filter, thread, port uint32
	}{
		{call{"getpid", arch, unix.SYS_GETPID, [3]uint64{}}, allow, allow, allow},
		{call{"getpid, another ABI", arch ^ 1, unix.SYS_GETPID, [3]uint64{}}, enosy, enosy, enosy},
		{call{"mount", arch, unix.SYS_MOUNT, [3]uint64{}}, eperm, eperm, allow},
		{call{"setns", arch, unix.SYS_SETNS, [3]uint64{}}, eperm, allow, allow},
		{call{"io_uring_setup", arch, unix.SYS_IO_URING_SETUP, [3]uint64{}}, eperm, eperm, eperm},
		{call{"clone3", arch, unix.SYS_CLONE3, [3]uint64{}}, enosy, enosy, allow},
		{call{"unshare(CLONE_NEWUSER)", arch, unix.SYS_UNSHARE, [3]uint64{unix.CLONE_NEWUSER}}, eperm, eperm, allow},
		{call{"unshare(CLONE_NEWNS)", arch, unix.SYS_UNSHARE, [3]uint64{unix.CLONE_NEWNS}}, allow, allow, allow},
		{call{"tcp", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_STREAM|flags, 0)}, allow, allow, allow},
		{call{"tcp6", arch, unix.SYS_SOCKET, sock(unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP)}, allow, allow, allow},
		{call{"udp", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP)}, allow, allow, allow},
		{call{"unix", arch, unix.SYS_SOCKET, sock(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)}, allow, allow, allow},
		{call{"netlink route", arch, unix.SYS_SOCKET, sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)}, allow, allow, allow},
		{call{"socketpair unix", arch, unix.SYS_SOCKETPAIR, sock(unix.AF_UNIX, unix.SOCK_STREAM, 0)}, allow, allow, allow},
		// The kernel reads int arguments: a high half set is not another family.
		{call{"tcp, high halves set", arch, unix.SYS_SOCKET, sock(1<<32|unix.AF_INET, 1<<32|unix.SOCK_STREAM, 1<<32)}, allow, allow, allow},
		{call{"mptcp, high halves set", arch, unix.SYS_SOCKET, sock(1<<32|unix.AF_INET, unix.SOCK_STREAM, 1<<32|ipprotoMPTCP)}, eperm, eperm, eperm},
		{call{"mptcp", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP)}, eperm, eperm, eperm},
		{call{"mptcp6", arch, unix.SYS_SOCKET, sock(unix.AF_INET6, unix.SOCK_STREAM|flags, ipprotoMPTCP)}, eperm, eperm, eperm},
		{call{"sctp", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_SEQPACKET, ipprotoSCTP)}, eperm, eperm, eperm},
		{call{"smc", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_STREAM, ipprotoSMC)}, eperm, eperm, eperm},
		{call{"AF_SMC", arch, unix.SYS_SOCKET, sock(afSMC, unix.SOCK_STREAM, 0)}, eperm, eperm, eperm},
		{call{"udp on a stream", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_UDP)}, eperm, eperm, eperm},
		{call{"tcp on a datagram", arch, unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_TCP)}, eperm, eperm, eperm},
		{call{"raw", arch, unix.SYS_SOCKET, sock(unix.AF_INET6, unix.SOCK_RAW, 0)}, eperm, eperm, eperm},
		{call{"SOCK_PACKET", arch, unix.SYS_SOCKET, sock(unix.AF_INET, sockPacket, 0)}, eperm, eperm, eperm},
		{call{"a type past the mask", arch, unix.SYS_SOCKET, sock(unix.AF_INET, 0x10|unix.SOCK_STREAM, 0)}, allow, allow, allow}, // the kernel answers EINVAL
		{call{"packet", arch, unix.SYS_SOCKET, sock(unix.AF_PACKET, unix.SOCK_RAW, 0)}, eperm, eperm, eperm},
		{call{"vsock", arch, unix.SYS_SOCKET, sock(unix.AF_VSOCK, unix.SOCK_STREAM, 0)}, eperm, eperm, eperm},
		{call{"netlink sock_diag", arch, unix.SYS_SOCKET, sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG)}, eperm, eperm, eperm},
		{call{"socketpair inet", arch, unix.SYS_SOCKETPAIR, sock(unix.AF_INET, unix.SOCK_STREAM, 0)}, eperm, eperm, eperm},
	}
	if runtime.GOARCH == "amd64" {
		cases = append(cases, struct {
			call
			filter, thread, port uint32
		}{call{"x32 socket", arch, x32SyscallBit | unix.SYS_SOCKET, sock(unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP)}, enosy, enosy, enosy})
	}
	vms := map[string]*xbpf.VM{}
	for name, build := range map[string]func() ([]unix.SockFilter, error){
		"filter": func() ([]unix.SockFilter, error) { return filterProgram(false) },
		"thread": func() ([]unix.SockFilter, error) { return filterProgram(true) },
		"port":   portProgram,
	} {
		prog, err := build()
		if err != nil {
			t.Fatal(err)
		}
		raw := make([]xbpf.RawInstruction, len(prog))
		for i, in := range prog {
			raw[i] = xbpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
		}
		insns, ok := xbpf.Disassemble(raw)
		if !ok {
			t.Fatalf("%s: an instruction x/net/bpf does not know", name)
		}
		if vms[name], err = xbpf.NewVM(insns); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, c := range cases {
		// struct seccomp_data, each word as the program loads it (x/net's
		// machine loads big-endian, the kernel natively: the values match).
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], c.nr)
		binary.BigEndian.PutUint32(data[4:], c.arch)
		for i, a := range c.args {
			binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))       // the low half (little-endian machines)
			binary.BigEndian.PutUint32(data[16+8*i+4:], uint32(a>>32)) // the high half
		}
		for name, want := range map[string]uint32{"filter": c.filter, "thread": c.thread, "port": c.port} {
			got, err := vms[name].Run(data)
			if err != nil || uint32(got) != want {
				t.Errorf("%s, %s: %#x (%v), want %#x", name, c.name, got, err, want)
			}
		}
	}
}
