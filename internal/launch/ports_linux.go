package launch

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// toold's own listeners, out of its runs' reach (issue 24, finding 1). A
// command with network: true, or a consultation CLI (which always has the
// network), shares the host's network namespace and so reached toold's
// API on loopback: with no keys configured it could call any tool as the
// anonymous caller. ProtectPorts takes toold's listening TCP ports away
// from every program started afterwards, on any address, with Landlock
// (Linux 6.7 and later, Landlock ABI 4): a ruleset that handles TCP
// connect and allows every port but these, applied by each launcher
// thread to itself (landlock_restrict_self restricts the calling thread,
// and children inherit it) — or, for namespaces without root, whose
// thread may not set no_new_privs, by the shim before its exec. So a
// networked run keeps its egress, but connect() to toold's ports fails
// with EACCES. A run's own servers on those ports inside a network
// namespace of its own are refused too; a remote service on one of them
// as well (the price of a rule by port).
//
// Landlock's rule sees TCP sockets only (sk_is_tcp: SOCK_STREAM and
// IPPROTO_TCP): a run that opened socket(AF_INET, SOCK_STREAM,
// IPPROTO_MPTCP) connected to toold's API past it (issue 38, finding 1),
// and SCTP or SMC would have too where the kernel has them. So the guard
// is two parts, applied together: the Landlock ruleset, and a seccomp
// filter of the socket rules (seccomp_linux.go, portProgram) that leaves
// a run no stream socket but TCP, and no io_uring (which makes sockets
// without the socket syscall). The filter goes on every run while the
// ports are protected, those of containment none and seccomp: false too;
// a run with the full syscall filter has the same rules twice.
//
// UDP: no Landlock ABI handles UDP (ABI 7, Linux 6.15, has TCP bind and
// connect only), so the ruleset cannot take a UDP port away, and this
// code does not pretend to. What holds instead: toold listens on no UDP
// port (its API, admin and NATS listeners are TCP: ProtectPorts takes TCP
// ports), so a datagram to one of its ports reaches no socket of toold's;
// and the socket rules leave a run UDP only as SOCK_DGRAM with protocol 0
// or IPPROTO_UDP (no UDP-Lite, raw or packet sockets to forge TCP with).
// A run that must not send datagrams to the host at all needs network:
// false (a network namespace of its own).

// portGuard is the ruleset of ProtectPorts, shared by every launcher.
type portGuard struct {
	fd    int      // the Landlock ruleset
	file  *os.File // fd, as the shim's ExtraFiles pass it
	ports []int    // what it takes away, sorted
}

// landlockRuleset is struct landlock_ruleset_attr up to its network field.
type landlockRuleset struct {
	handledFS  uint64
	handledNet uint64
}

// landlockNetPort is struct landlock_net_port_attr.
type landlockNetPort struct {
	allowed uint64
	port    uint64
}

// landlockNetABI is the first Landlock ABI with network rules;
// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT (not in x/sys yet).
const (
	landlockNetABI      = 4
	landlockRuleNetPort = 2
)

// ErrNoPortGuard is a kernel without Landlock's network rules (before
// 6.7, or Landlock not enabled): ProtectPorts cannot hold there.
var ErrNoPortGuard = errors.New("this kernel has no Landlock network rules (Linux 6.7 and later, with Landlock enabled)")

// newPortGuard builds the ruleset allowing TCP connect to every port but
// ports.
func newPortGuard(ports []int) (*portGuard, error) {
	abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 || int(abi) < landlockNetABI {
		return nil, ErrNoPortGuard
	}
	attr := landlockRuleset{handledNet: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return nil, fmt.Errorf("landlock ruleset: %w", e)
	}
	g := &portGuard{fd: int(fd), file: os.NewFile(fd, "landlock ruleset"), ports: slices.Sorted(slices.Values(ports))}
	for p := 0; p <= 65535; p++ {
		if _, found := slices.BinarySearch(g.ports, p); found {
			continue
		}
		rule := landlockNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(p)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, landlockRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
			_ = g.file.Close()
			return nil, fmt.Errorf("landlock rule for port %d: %w", p, e)
		}
	}
	return g, nil
}

// restrict applies the ruleset and the socket rules of portProgram to
// the calling thread, which has no_new_privs set.
func (g *portGuard) restrict() error {
	if g == nil {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(g.fd), 0, 0); e != 0 {
		return fmt.Errorf("landlock: %w", e)
	}
	prog, err := portProgram()
	if err != nil {
		return err
	}
	if err := install(prog); err != nil {
		return fmt.Errorf("the port guard's socket rules: %w", err)
	}
	return nil
}

// ProtectPorts makes toold's listening TCP ports unreachable to every
// program started from now on, whatever its network (see the top of this
// file); cmd/toold calls it once its listeners are bound, before it
// starts MCP servers or serves a call. A second call is refused. On a
// kernel without Landlock's network rules it returns ErrNoPortGuard and
// changes nothing.
func (l *Launcher) ProtectPorts(ports ...int) error {
	h := l.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ports != nil {
		return errors.New("ProtectPorts: the ports are protected already")
	}
	g, err := newPortGuard(ports)
	if err != nil {
		return err
	}
	for _, ln := range h.launchers {
		err := ln.do(func() error { return ln.restrictPorts(g) })
		if errors.Is(err, errRetired) || errors.Is(err, errClosed) {
			continue // it starts nothing any more
		}
		if err != nil {
			_ = g.file.Close()
			return err
		}
	}
	h.ports = g
	return nil
}

// restrictPorts applies g on the launcher's thread; a thread of
// namespaces without root leaves it to the shim of each run.
func (l *launcher) restrictPorts(g *portGuard) error {
	if l.userns != nil {
		l.userns.ports.Store(g)
		return nil
	}
	return g.restrict()
}

// guardNew applies the ports protected already to a launcher started
// after ProtectPorts. The caller holds h.mu.
func (h *host) guardNew(l *launcher) error {
	if h.ports == nil {
		return nil
	}
	return l.do(func() error { return l.restrictPorts(h.ports) })
}
