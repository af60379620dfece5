package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toold/toold/internal/egress"
)

// A run whose sandbox has an allow-list (network: {allow: ...}) gets a
// network namespace of its own with nothing in it but a loopback, and on
// that loopback, at 127.0.0.1:proxyPort, toold's egress proxy
// (internal/egress): the run's only way out. The proxy is toold's code,
// running in toold's process; only its listening socket lives in the
// run's namespace. How that socket gets there depends on who can enter
// the namespace (egress_linux.go):
//
//   - namespaces as root: toold enters the new namespace itself, on a
//     thread of its own, while the child is stopped after its exec, and
//     opens the listener there: no process more.
//   - namespaces without root: the shim, which runs in the namespace
//     anyway, opens the listener before it execs the command and sends it
//     to toold over a socket pair (SCM_RIGHTS).
//   - bwrap: toold's own binary runs first inside the sandbox as a helper
//     (egressArg0) that does the same and execs the command: toold cannot
//     enter a namespace bwrap made in a user namespace of its own.
//
// The run's bundle (the system's roots, ca_files, and the run's own
// authority when it injects headers) is a file toold writes to a host
// directory of the run and binds read-only into the sandbox at the same
// path; it holds certificates only, never a key.
//
// On macOS (seatbelt) a run has no namespace of its own: the proxy
// listens on toold's loopback, at a port of its own, and the run's
// profile allows that one port and no other address, port or resolver
// (seatbelt.go). Other programs of the Mac reach that port too, so the
// proxy serves only requests carrying the run's proxy credentials, a
// random token in the proxy URL of the run's environment. On Windows an
// AppContainer reaches no address of its own machine (ports_windows.go),
// so no proxy toold serves there is reachable: a job run's network is
// true (internetClient: any host but this machine's) or false, and an
// allow-list is refused when the tool is loaded (ErrNoAllowList).

// ErrNoAllowList is a containment mode that cannot hold an allow-list.
var ErrNoAllowList = errors.New("an allow-list needs a sandbox whose only way out is toold's egress proxy")

// netModes are the modes that can hold an allow-list: those whose runs
// have a network namespace of their own (Linux), and seatbelt, whose
// profile lets a run reach one port of the host's loopback, the proxy's
// (macOS). Job Objects cannot take the network away (Windows).
var netModes = map[Mode]bool{ModeNamespaces: true, ModeBwrap: true, ModeSeatbelt: true}

// proxyPort is where the proxy listens in a run's namespace, unless it is
// one of toold's own ports (which the port guard denies).
const proxyPort = 3128

// RunNet is what a run's egress proxy needs from its caller.
type RunNet struct {
	// Tool names the run in the egress metrics.
	Tool string
	// Credentials resolves ${user:NAME} for the call's principal.
	Credentials egress.Resolver
}

// netRun is one run's egress proxy and how it reaches the run.
type netRun struct {
	run    *egress.Run
	port   int
	env    []string
	bundle string // the bundle's host path, also its path in the sandbox; "" without one
	dir    string // the run's host directory of it
	// child is the run's end of the socket pair its in-namespace listener
	// comes back on (shim and bwrap helper); back is toold's.
	child *os.File
	back  *net.UnixConn

	once   sync.Once
	report *egress.Report
}

// openNet makes a run's proxy: the egress.Run, its port, its bundle file.
func (l *Launcher) openNet(ctx context.Context, sb *sandbox, rn RunNet) (_ *netRun, err error) {
	deny := l.host.protectedPorts()
	o := egress.RunOptions{Tool: rn.Tool, Credentials: rn.Credentials, DenyPorts: deny}
	if sb.mode == ModeSeatbelt {
		// The host's loopback: other programs of the host reach the
		// listener too, so it serves only who has the run's credentials.
		o.Token = newRunID()
	}
	r, err := sb.egress.NewRun(ctx, o)
	if err != nil {
		return nil, err
	}
	n := &netRun{run: r, port: proxyPort}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	for slices.Contains(deny, n.port) {
		n.port++
	}
	if sb.mode == ModeSeatbelt {
		// No namespace of the run's own: the proxy listens on toold's
		// loopback, at a port the run's profile alone allows.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("the run's egress proxy: %w", err)
		}
		n.port = ln.Addr().(*net.TCPAddr).Port
		r.Serve(ln)
	}
	if b := r.Bundle(); b != nil {
		if n.dir, err = os.MkdirTemp(l.tmpBase, "egress-"); err != nil {
			return nil, fmt.Errorf("the run's certificate bundle: %w", err)
		}
		if err = os.Chmod(n.dir, 0o755); err != nil {
			return nil, err
		}
		n.bundle = filepath.Join(n.dir, "ca-bundle.pem")
		if err = os.WriteFile(n.bundle, b, 0o644); err != nil {
			return nil, fmt.Errorf("the run's certificate bundle: %w", err)
		}
	}
	n.env = r.Env("127.0.0.1:"+strconv.Itoa(n.port), n.bundle)
	return n, nil
}

// close ends the proxy (every connection of the run) and removes the
// bundle; its report stays. Safe to call again.
func (n *netRun) close() *egress.Report {
	if n == nil {
		return nil
	}
	n.once.Do(func() {
		n.report = n.run.Close()
		if n.child != nil {
			_ = n.child.Close()
		}
		if n.back != nil {
			_ = n.back.Close()
		}
		if n.dir != "" {
			_ = os.RemoveAll(n.dir)
		}
	})
	return n.report
}

// withNet is sb for one run with a proxy: its bundle bound in.
func (sb *sandbox) withNet(n *netRun) *sandbox {
	run := *sb
	run.net = n
	if n.bundle != "" {
		run.roPaths = append(slices.Clone(sb.roPaths), n.bundle)
	}
	return &run
}

// netEnv is env with the proxy's variables, replacing any the sandbox
// set: two values of HTTPS_PROXY would leave the choice to each program.
func netEnv(env []string, n *netRun) []string {
	out := make([]string, 0, len(env)+len(n.env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(egress.ProxyVars, name) && !slices.Contains(egress.CAVars, name) {
			out = append(out, kv)
		}
	}
	return append(out, n.env...)
}

// compileNetwork resolves a sandbox's allow-list for mode: only a mode
// whose runs can be held to the proxy (netModes) can hold one.
func (l *Launcher) compileNetwork(c Sandbox, mode Mode) (*egress.Compiled, error) {
	p := c.Network.AllowList()
	if p == nil {
		return nil, nil
	}
	if !netModes[mode] {
		return nil, fmt.Errorf("network: %w, which containment %s does not give: use namespaces or bwrap (Linux) or seatbelt (macOS); "+
			"a job run (Windows) reaches no proxy on its own machine, so its network is true (internet hosts) or false", ErrNoAllowList, mode)
	}
	c2, err := egress.Compile(*p, l.cfg.Egress)
	if err != nil {
		return nil, prefixLines("network.", err)
	}
	return c2, nil
}
