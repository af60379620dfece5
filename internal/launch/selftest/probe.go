package selftest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"
)

// Probe is `toold sandbox probe ATTACK ARGS…`, run inside a sandbox by
// Run: it tries one attack and exits 0 when it got through, 1 when it was
// refused, 2 when its arguments are wrong. What it did goes to stdout.
func Probe(args []string, stdout io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stdout, "probe: no attack named")
		return 2
	}
	through := func(format string, a ...any) int { fmt.Fprintf(stdout, format+"\n", a...); return 0 }
	refused := func(format string, a ...any) int { fmt.Fprintf(stdout, format+"\n", a...); return 1 }
	need := func(n int) bool { return len(args) == n+1 }
	switch attack := args[0]; {
	case attack == "write" && need(1):
		if err := os.WriteFile(args[1], []byte("planted by a run\n"), 0o644); err != nil {
			return refused("write %s: %v", args[1], err)
		}
		return through("wrote %s", args[1])
	case attack == "read" && need(1):
		b, err := os.ReadFile(args[1])
		if err != nil {
			return refused("read %s: %v", args[1], err)
		}
		return through("read %d bytes of %s", len(b), args[1])
	case attack == "replace" && need(1):
		if err := os.Rename(args[1], args[1]+".moved"); err != nil {
			return refused("rename %s: %v", args[1], err)
		}
		if err := os.Mkdir(args[1], 0o755); err != nil {
			return through("renamed %s away (making a new one: %v)", args[1], err)
		}
		return through("renamed %s away and made a new one", args[1])
	case attack == "link" && need(2):
		if err := os.Link(args[1], args[2]); err != nil {
			return refused("link %s: %v", args[1], err)
		}
		b, err := os.ReadFile(args[2])
		if err != nil {
			return refused("linked %s, but reading the link: %v", args[1], err)
		}
		return through("linked %s into reach and read %d bytes", args[1], len(b))
	case attack == "dial" && len(args) > 1:
		var reached, refusals []string
		for _, addr := range args[1:] {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				refusals = append(refusals, err.Error())
				continue
			}
			_ = c.Close()
			reached = append(reached, addr)
		}
		if len(reached) > 0 {
			return through("connected to %v (refused: %v)", reached, refusals)
		}
		return refused("every address refused: %v", refusals)
	case attack == "dialunix" && need(1):
		c, err := net.DialTimeout("unix", args[1], 2*time.Second)
		if err != nil {
			return refused("connect %s: %v", args[1], err)
		}
		_ = c.Close()
		return through("connected to %s", args[1])
	case attack == "detach" && need(1):
		exe, err := os.Executable()
		if err != nil {
			return refused("finding itself: %v", err)
		}
		cmd := exec.Command(exe, "sandbox", "probe", "heartbeat", args[1])
		if err := startDetached(cmd); err != nil {
			return refused("starting a detached process: %v", err)
		}
		_ = cmd.Process.Release()
		return through("started a detached process (pid %d) writing %s", cmd.Process.Pid, args[1])
	case attack == "heartbeat" && need(1):
		// Bounded: whatever held or did not, it is gone after 30 s.
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if f, err := os.OpenFile(args[1], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				_, _ = f.WriteString(".")
				_ = f.Close()
			}
		}
		return 0
	case attack == "hold" && need(0):
		// A long-lived run with a secret in its environment: it says so,
		// then waits for its stdin to close (bounded).
		fmt.Fprintln(stdout, "ready")
		done := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin)); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
		}
		return 0
	case attack == "scanenv" && need(1):
		where, err := scanEnvironments(args[1])
		if err != nil {
			return refused("looking: %v", err)
		}
		if where != "" {
			return through("found another run's secret in %s", where)
		}
		return refused("no process it can see holds the secret")
	}
	fmt.Fprintf(stdout, "probe: unknown attack or wrong arguments: %q\n", args)
	return 2
}
