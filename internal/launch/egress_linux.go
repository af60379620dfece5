package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// protectedPorts are the ports ProtectPorts took from every run: the
// proxy refuses them on every host too.
func (h *host) protectedPorts() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ports.list()
}

// list is the ports the guard takes away.
func (g *portGuard) list() []int {
	if g == nil {
		return nil
	}
	return g.ports
}

// egressArg0 marks a run of toold's binary as the egress helper of a
// bwrap run: argv is the binary's path, egressArg0, the spec, "--", the
// command.
const egressArg0 = "toold-egress-init"

// egressSpec is what the shim or the helper does for the proxy.
type egressSpec struct {
	Port int `json:"port"`
	FD   int `json:"fd"` // the socket the listener goes back to toold on
	// AddressSpace is RLIMIT_AS, set by the helper right before its exec
	// (its Go runtime needs more than the command may have).
	AddressSpace *unix.Rlimit `json:"address_space,omitempty"`
}

// pairUp makes the socket pair an in-namespace listener comes back on
// (namespaces without root, bwrap), and waits for it in the background:
// the proxy serves it once it arrives. Without a listener (the run failed
// before its exec) the run simply has no proxy.
func (n *netRun) pairUp() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the run's proxy: %w", err)
	}
	n.child = os.NewFile(uintptr(fds[1]), "egress child")
	parent := os.NewFile(uintptr(fds[0]), "egress parent")
	c, err := net.FileConn(parent)
	_ = parent.Close()
	if err != nil {
		return fmt.Errorf("the run's proxy: %w", err)
	}
	n.back = c.(*net.UnixConn)
	go n.receive()
	return nil
}

// receive takes the listener the run's namespace sends and serves it.
func (n *netRun) receive() {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := n.back.ReadMsgUnix(buf, oob)
	if err != nil || oobn == 0 {
		return
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return
	}
	if ln, err := fileListener(fds[0]); err == nil {
		n.run.Serve(ln)
	}
}

// started closes toold's copy of the run's end of the pair: the run
// holds the only one, so its end (before sending) ends receive.
func (n *netRun) started() {
	if n != nil && n.child != nil {
		_ = n.child.Close()
		n.child = nil
	}
}

// attachNet readies the parts of the run's start that belong to the
// proxy: the socket pair for the shim and the bwrap helper; for
// namespaces as root, the listener toold opens in the child's namespace
// at its exec stop.
func (sb *sandbox) attachNet(rs *runSetup) error {
	n := sb.net
	if sb.minimalRoot() && !sb.userns {
		rs.atStop = func(pid int) error {
			ln, err := listenInNamespaceOf(pid, n.port)
			if err != nil {
				return fmt.Errorf("the run's egress proxy: %w", err)
			}
			n.run.Serve(ln)
			return nil
		}
		return nil
	}
	return n.pairUp()
}

// listenInNamespaceOf opens the proxy's listener in pid's network
// namespace, from a thread of toold's that enters it (root: it has
// CAP_SYS_ADMIN there and here) and is never used again: the goroutine
// ends locked, so the runtime ends the thread with it.
func listenInNamespaceOf(pid, port int) (net.Listener, error) {
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(ns)
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			done <- result{-1, fmt.Errorf("entering the run's network namespace: %w", err)}
			return
		}
		fd, err := listenLoopback(port)
		done <- result{fd, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	return fileListener(r.fd)
}

// listenLoopback brings the namespace's loopback up and listens on
// 127.0.0.1:port there; it uses raw system calls only, so the shim and
// the helper can run it before their exec.
func listenLoopback(port int) (int, error) {
	if err := loopbackUp(); err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("the proxy's socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("the proxy's address 127.0.0.1:%d: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("the proxy's listener: %w", err)
	}
	return fd, nil
}

// loopbackUp sets lo up in the calling thread's network namespace (bwrap
// has done it already: then this changes nothing).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("the loopback's flags: %w", err)
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing the loopback up: %w", err)
	}
	return nil
}

// fileListener makes a net.Listener of a listening socket's descriptor
// (and closes the descriptor: the listener has its own).
func fileListener(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "egress listener")
	defer f.Close()
	return net.FileListener(f)
}

// sendListener opens the proxy's listener in this process's namespace
// and sends it to toold on spec.FD, then closes both: the shim's and the
// helper's part.
func sendListener(spec egressSpec) error {
	fd, err := listenLoopback(spec.Port)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	defer unix.Close(spec.FD)
	if err := unix.Sendmsg(spec.FD, []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("handing the proxy's listener to toold: %w", err)
	}
	return nil
}

// runEgressHelper is the helper of a bwrap run (egressArg0): it opens the
// proxy's listener inside the sandbox, hands it to toold and execs the
// command; it returns only on error.
func runEgressHelper(specJSON string, argv []string) error {
	var spec egressSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if err := sendListener(spec); err != nil {
		return err
	}
	// toold's binary and the socket stay here.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("closing inherited descriptors: %w", err)
	}
	return execLimited(argv, spec.AddressSpace, nil)
}

// helped says whether sb's runs start through the egress helper.
func (sb *sandbox) helped() bool { return sb.net != nil && sb.mode == ModeBwrap }

// egressFiles are the run's descriptors for the proxy after first (the
// number of ExtraFiles before them, the filter pipe counted): toold's
// binary for the helper (bwrap only) and the socket. It returns the spec
// the shim or the helper reads, and the files in order.
func (sb *sandbox) egressFiles(first int, exe *os.File) (egressSpec, []*os.File) {
	n := sb.net
	if sb.helped() {
		spec := egressSpec{Port: n.port, FD: 3 + first + 1}
		for _, r := range sb.limits {
			if r.resource == unix.RLIMIT_AS {
				spec.AddressSpace = &unix.Rlimit{Cur: r.cur, Max: r.max}
			}
		}
		return spec, []*os.File{exe, n.child}
	}
	return egressSpec{Port: n.port, FD: 3 + first}, []*os.File{n.child}
}

// helperArgv wraps argv in the egress helper: toold's binary, passed as
// descriptor exeFD, runs first inside the sandbox.
func helperArgv(exeFD int, spec egressSpec, argv []string) []string {
	b, _ := json.Marshal(spec)
	return append([]string{"/proc/self/fd/" + strconv.Itoa(exeFD), egressArg0, string(b), "--"}, argv...)
}

// errNoSelf is toold's binary not found for the helper.
var errNoSelf = errors.New("the egress helper needs toold's own binary (/proc/self/exe)")
