// Package selftest is `toold sandbox selftest`: on the machine it runs on,
// it starts each containment mode toold provides there and, in each,
// tries what an attacker's program would — write outside the workspace,
// read the user's and toold's own files, write .git or rename it away,
// reach toold's port on every address, reach a unix socket it was not
// given, use the network it was not given, outlive the call, read another
// run's environment, hard-link a file from outside — and prints a table of
// what held. The attacks are made by the same binary, run inside each
// sandbox as `toold sandbox probe …` (Probe): a copy of the executable in
// the test's own directory, so that the run-as uid can start it.
//
// It is the proof a Mac or Windows user can attach to a report: CI here
// runs it for every Linux mode (cmd/toold's TestSandboxSelftest), and its
// macOS and Windows cases are compiled and vetted there.
//
//	toold sandbox selftest            # every mode; exit 1 when a sandbox did not hold
//	toold sandbox selftest -mode bwrap
package selftest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/toold/toold/internal/launch"
)

// Verdicts of one attack in one mode.
const (
	Held     = "held"
	NotHeld  = "NOT HELD"
	Skipped  = "skipped"
	Errored  = "error"
	NotTried = "n/a"
)

// Cell is what one attack did in one mode.
type Cell struct {
	Verdict string
	Detail  string // what the probe said, or why it was skipped
}

// Report is the table: one row per attack, one column per mode.
type Report struct {
	Platform string
	Modes    []launch.Mode
	// Unavailable says why a mode could not be tried here.
	Unavailable map[launch.Mode]string
	Attacks     []string
	Cells       map[string]map[launch.Mode]Cell
}

// Failed says whether a mode that isolates (not none) let an attack
// through, or a probe failed: the exit status of the command.
func (r *Report) Failed() bool {
	for _, row := range r.Cells {
		for m, c := range row {
			if (c.Verdict == NotHeld && m != launch.ModeNone) || c.Verdict == Errored {
				return true
			}
		}
	}
	return false
}

// KnownGap says why an attack gets through a mode that isolates on this
// kind of machine, when it is a gap found by the selftest and reported
// (docs/security.md), and "" when the attack must be held. The tests hold
// such a gap to NOT HELD, so that closing it fails them until the entry
// goes.
func KnownGap(m launch.Mode, attack string) string {
	if runtime.GOOS == "linux" && m == launch.ModeNamespaces && attack == "read another run's environment" && os.Geteuid() == 0 {
		return "as root, the minimal root's /proc is mounted once, in the host's PID namespace (root_linux.go, " +
			"hidepid=2): every run is uid 65534, so one reads another's /proc/PID/environ"
	}
	return ""
}

// Options says what to try.
type Options struct {
	// Exe is the binary that runs the probes (toold's own).
	Exe string
	// Modes to try; nil: every mode this OS provides (launch.Modes).
	Modes []launch.Mode
	// Log, when set, gets a line as each attack ends.
	Log io.Writer
}

// attack is one row: the sandbox it runs in, the probe's argv (after
// `sandbox probe`), and whether a run there must also be given the unix
// socket. A probe exits 0 when the attack got through, 1 when it was
// refused.
type attack struct {
	name    string
	sandbox func(e *env) launch.Sandbox
	argv    func(e *env) []string
	// special is an attack that is more than one run (outliving the call,
	// another run's environment).
	special func(ctx context.Context, e *env, l *launch.Launcher) Cell
}

// env is what the attacks of one mode share: the test's directories, the
// listeners and the probe binary.
type env struct {
	root, ws, outside, private, exe string
	tooldPort, otherPort            int
	socket                          string
	lan                             string // a non-loopback address of this machine, "" if none
	token                           string
}

var attacks = []attack{
	{name: "write outside the workspace",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{WorkspaceWritable: true} },
		argv:    func(e *env) []string { return []string{"write", filepath.Join(e.outside, "planted.txt")} }},
	{name: "read the user's files",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{} },
		argv:    func(e *env) []string { return []string{"read", filepath.Join(e.outside, "secret.txt")} }},
	{name: "read toold's own files",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{} },
		argv:    func(e *env) []string { return []string{"read", filepath.Join(e.private, "key")} }},
	{name: "write a read-only workspace",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{} },
		argv:    func(e *env) []string { return []string{"write", filepath.Join(e.ws, "out.txt")} }},
	{name: "write .git of a writable workspace",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{WorkspaceWritable: true} },
		argv:    func(e *env) []string { return []string{"write", filepath.Join(e.ws, ".git", "config")} }},
	{name: "rename .git away and make a new one",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{WorkspaceWritable: true} },
		argv:    func(e *env) []string { return []string{"replace", filepath.Join(e.ws, ".git")} }},
	{name: "hard-link a file from outside, read it",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{WorkspaceWritable: true} },
		argv: func(e *env) []string {
			return []string{"link", filepath.Join(e.outside, "secret.txt"), filepath.Join(e.ws, "linked.txt")}
		}},
	{name: "reach toold's port (networked run, every address)",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{Network: on()} },
		argv: func(e *env) []string {
			return append([]string{"dial"}, addresses(e, e.tooldPort)...)
		}},
	{name: "reach toold's port (run without network)",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{} },
		argv:    func(e *env) []string { return append([]string{"dial"}, addresses(e, e.tooldPort)...) }},
	{name: "reach a unix socket it was not given",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{Network: on()} },
		argv:    func(e *env) []string { return []string{"dialunix", e.socket} }},
	{name: "use the network it was not given",
		sandbox: func(*env) launch.Sandbox { return launch.Sandbox{} },
		argv:    func(e *env) []string { return append([]string{"dial"}, addresses(e, e.otherPort)...) }},
	{name: "outlive the call (a detached process)", special: outlive},
	{name: "read another run's environment", special: otherRun},
}

// Names are the attacks' names, in the table's order.
func Names() []string {
	out := make([]string, len(attacks))
	for i, a := range attacks {
		out[i] = a.name
	}
	return out
}

func on() *launch.Network { return launch.NetworkOn() }

// addresses are the addresses of this machine a run might reach port on.
func addresses(e *env, port int) []string {
	p := strconv.Itoa(port)
	out := []string{net.JoinHostPort("127.0.0.1", p), net.JoinHostPort("::1", p), net.JoinHostPort("::ffff:127.0.0.1", p),
		net.JoinHostPort("0.0.0.0", p)}
	if e.lan != "" {
		out = append(out, net.JoinHostPort(e.lan, p))
	}
	return out
}

// Run tries every attack in every mode and returns the table.
func Run(ctx context.Context, o Options) (*Report, error) {
	modes := o.Modes
	if modes == nil {
		modes = launch.Modes()
	}
	r := &Report{Platform: runtime.GOOS + "/" + runtime.GOARCH + ", uid " + uid(), Modes: modes,
		Unavailable: map[launch.Mode]string{}, Attacks: Names(), Cells: map[string]map[launch.Mode]Cell{}}
	for _, a := range attacks {
		r.Cells[a.name] = map[launch.Mode]Cell{}
	}
	for _, m := range modes {
		if err := runMode(ctx, o, m, r); err != nil {
			r.Unavailable[m] = err.Error()
		}
	}
	return r, nil
}

// runMode sets a mode's stage up and runs every attack in it.
func runMode(ctx context.Context, o Options, m launch.Mode, r *Report) error {
	e, cleanup, err := stage(o.Exe)
	if err != nil {
		return err
	}
	defer cleanup()
	own, err := net.Listen("tcp", ":0") // toold's API, on every address
	if err != nil {
		return err
	}
	defer own.Close()
	other, err := net.Listen("tcp", ":0") // a service of this machine that is not toold
	if err != nil {
		return err
	}
	defer other.Close()
	unix, err := net.Listen("unix", e.socket) // an agent's socket
	if err != nil {
		return err
	}
	defer unix.Close()
	_ = os.Chmod(e.socket, 0o777)
	for _, ln := range []net.Listener{own, other, unix} {
		go accept(ln)
	}
	e.tooldPort, e.otherPort = own.Addr().(*net.TCPAddr).Port, other.Addr().(*net.TCPAddr).Port
	l, err := launch.New(launch.Config{Containment: string(m), Private: []string{e.private}}, e.ws)
	if err != nil {
		return err
	}
	defer l.Close()
	if _, err := l.CommandRunner(launch.Sandbox{}); err != nil {
		return err // the mode does not work here
	}
	portErr := l.ProtectPorts(e.tooldPort)
	for _, a := range attacks {
		var c Cell
		if a.special != nil {
			c = a.special(ctx, e, l)
		} else {
			c = probe(ctx, l, a.sandbox(e), e.exe, a.argv(e))
		}
		if c.Verdict == NotHeld && strings.HasPrefix(a.name, "reach toold's port") && portErr != nil {
			c.Detail += " (toold's port guard: " + portErr.Error() + ")"
		}
		r.Cells[a.name][m] = c
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%-12s %-52s %s %s\n", m, a.name, c.Verdict, c.Detail)
		}
	}
	return nil
}

// stage makes the directories of one mode's attacks, reachable by the
// run-as uid (as the sandbox, not file modes, must stop each attack): a
// workspace with a .git, the user's files outside it, toold's own files,
// an agent's socket, and a copy of the probe binary.
func stage(exe string) (*env, func(), error) {
	root, err := os.MkdirTemp("", "toold-selftest-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(root) }
	if root, err = filepath.EvalSymlinks(root); err != nil {
		cleanup()
		return nil, nil, err
	}
	e := &env{root: root, ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "home"),
		private: filepath.Join(root, "state"), token: newToken()}
	// A unix socket's path is short (104 bytes on macOS): beside root.
	e.socket = filepath.Join(os.TempDir(), "toold-selftest-"+e.token[:8]+".sock")
	steps := []func() error{
		func() error { return os.Chmod(root, 0o755) },
		func() error { return os.MkdirAll(filepath.Join(e.ws, ".git"), 0o777) },
		func() error { return os.MkdirAll(e.outside, 0o777) },
		func() error { return os.MkdirAll(e.private, 0o755) },
		func() error { return os.WriteFile(filepath.Join(e.ws, ".git", "config"), []byte("[core]\n"), 0o666) },
		func() error {
			return os.WriteFile(filepath.Join(e.outside, "secret.txt"), []byte("the user's secret"), 0o644)
		},
		func() error { return os.WriteFile(filepath.Join(e.private, "key"), []byte("toold's key"), 0o644) },
		func() error { return copyExe(exe, filepath.Join(root, "probe"+filepath.Ext(exe))) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	for _, d := range []string{e.ws, filepath.Join(e.ws, ".git"), e.outside} {
		_ = os.Chmod(d, 0o777) // past the umask
	}
	_ = os.Chmod(filepath.Join(e.ws, ".git", "config"), 0o666)
	e.exe = filepath.Join(root, "probe"+filepath.Ext(exe))
	e.lan = lanAddress()
	return e, func() { cleanup(); _ = os.Remove(e.socket) }, nil
}

// probe runs one attack: exit 0 got through, 1 was refused.
func probe(ctx context.Context, l *launch.Launcher, sb launch.Sandbox, exe string, argv []string) Cell {
	// As a program that is not a command tool: no address-space limit,
	// which a Go binary's runtime reserves past (the attacks need none).
	r, err := l.Runner(sb)
	if err != nil {
		return Cell{Errored, "resolving the sandbox: " + err.Error()}
	}
	res, err := r.Run(ctx, launch.RunSpec{Argv: append([]string{exe, "sandbox", "probe"}, argv...), Timeout: 20 * time.Second})
	if err != nil {
		return Cell{Errored, "starting the probe: " + err.Error()}
	}
	return verdict(res)
}

// verdict reads a probe's result.
func verdict(res *launch.Result) Cell {
	out := strings.TrimSpace(res.Stdout + " " + res.Stderr)
	switch {
	case res.TimedOut:
		return Cell{Errored, "the probe timed out: " + out}
	case res.ExitCode == 0:
		return Cell{NotHeld, out}
	case res.ExitCode == 1:
		return Cell{Held, out}
	}
	return Cell{Errored, fmt.Sprintf("the probe exited %d (%s): %s", res.ExitCode, res.Signal, out)}
}

// outlive: a run starts a detached process (setsid; on Windows detached
// and asking to leave the job) that appends to a file of the writable
// workspace every 100 ms for 30 s, and ends at once. Held when the file
// stops growing within a second of the call's end.
func outlive(ctx context.Context, e *env, l *launch.Launcher) Cell {
	beat := filepath.Join(e.ws, "heartbeat")
	c := probe(ctx, l, launch.Sandbox{WorkspaceWritable: true}, e.exe, []string{"detach", beat})
	if c.Verdict != NotHeld { // the probe itself says 0 once it started the child
		return Cell{Errored, "the detached process did not start: " + c.Detail}
	}
	time.Sleep(time.Second) // what the call's end left behind has a second to go
	before := size(beat)
	time.Sleep(600 * time.Millisecond)
	if after := size(beat); after > before {
		return Cell{NotHeld, fmt.Sprintf("a detached process still wrote %s after the call ended (%d → %d bytes)", beat, before, after)}
	}
	return Cell{Held, "nothing of the run was left writing after the call ended"}
}

func size(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// otherRun: one run (a long-lived program, as an MCP server is) holds a
// secret in its environment; another run of another sandbox looks for it
// in every process it can see.
func otherRun(ctx context.Context, e *env, l *launch.Launcher) Cell {
	p, err := l.Start(launch.ProcessSpec{Argv: []string{e.exe, "sandbox", "probe", "hold"},
		Sandbox: launch.Sandbox{Env: map[string]string{"TOOLD_SELFTEST_SECRET": e.token}}})
	if err != nil {
		return Cell{Errored, "starting the run that holds a secret: " + err.Error()}
	}
	defer p.Stop(0)
	ready := make([]byte, 6)
	if _, err := io.ReadFull(p.Stdout, ready); err != nil || string(ready) != "ready\n" {
		return Cell{Errored, fmt.Sprintf("the run that holds a secret did not start: %v %q %s", err, ready, p.Stderr())}
	}
	return probe(ctx, l, launch.Sandbox{Network: on()}, e.exe, []string{"scanenv", e.token})
}

func accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

// lanAddress is a non-loopback unicast address of this machine, or "".
func lanAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

func copyExe(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("reading the probe binary: %w", err)
	}
	return os.WriteFile(to, b, 0o755)
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func uid() string {
	if u := os.Geteuid(); u >= 0 {
		return strconv.Itoa(u)
	}
	return "n/a"
}

// Table is the report as the command prints it: the platform, a row per
// attack, a column per mode, then what each cell that did not hold said.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "toold sandbox selftest on %s\n\n", r.Platform)
	width := 0
	for _, a := range r.Attacks {
		width = max(width, len(a))
	}
	fmt.Fprintf(&b, "%-*s", width+2, "attack")
	for _, m := range r.Modes {
		fmt.Fprintf(&b, "%-14s", m)
	}
	b.WriteString("\n")
	for _, a := range r.Attacks {
		fmt.Fprintf(&b, "%-*s", width+2, a)
		for _, m := range r.Modes {
			v := NotTried
			if _, down := r.Unavailable[m]; down {
				v = "unavailable"
			} else if c, ok := r.Cells[a][m]; ok {
				v = c.Verdict
			}
			fmt.Fprintf(&b, "%-14s", v)
		}
		b.WriteString("\n")
	}
	for _, m := range r.Modes {
		if why, down := r.Unavailable[m]; down {
			fmt.Fprintf(&b, "\n%s: unavailable here: %s\n", m, why)
		}
	}
	var notes []string
	for _, a := range r.Attacks {
		for _, m := range r.Modes {
			if c, ok := r.Cells[a][m]; ok && c.Verdict != Held {
				note := fmt.Sprintf("%s, %s: %s: %s", m, a, c.Verdict, c.Detail)
				if known := KnownGap(m, a); known != "" && c.Verdict == NotHeld {
					note += " (a known gap: " + known + ")"
				}
				notes = append(notes, note)
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nwhat got through, or could not be tried:\n  " + strings.Join(notes, "\n  ") + "\n")
	}
	b.WriteString("\nnone isolates nothing but toold's own ports (where a port guard exists): its NOT HELD rows are expected.\n")
	if r.Failed() {
		b.WriteString("A sandbox did not hold: attach this output to a report.\n")
	}
	return b.String()
}

// ErrUsage is a probe or selftest argument that does not parse.
var ErrUsage = errors.New("usage: toold sandbox selftest [-mode MODE]…")
