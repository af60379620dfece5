package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// ProcessSpec is a long-lived program run in a sandbox — an upstream MCP
// server speaking on its standard streams. It gets what a
// command gets (containment, the environment allow-list, rlimits, a private
// TMPDIR, its own process group) but no output cap: stdout is its protocol.
// Nor does it get a CPU-time or address-space limit unless its Sandbox sets
// one: it runs for as long as toold does.
type ProcessSpec struct {
	// Argv is the command line; Argv[0] is found on the sandbox's PATH.
	Argv []string
	// Dir is the working directory, relative to the workspace ("" is the
	// workspace).
	Dir     string
	Sandbox Sandbox
	// Name names the program in the egress metrics (the MCP server's
	// name), when its sandbox has an allow-list.
	Name string
}

// stderrTail is how much of a process's last stderr output Stderr keeps:
// enough for the error that ended it, for logs and messages.
const stderrTail = 8 << 10

// Process is a started ProcessSpec. Its stdin and stdout are the caller's
// to use; Stop ends it and its whole process tree.
type Process struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser

	k    *killer
	cg   *runCgroup
	net  *netRun // its egress proxy, ended with it
	tmp  string
	sb   *sandbox
	done chan struct{}
	err  error // set before done is closed

	mu   sync.Mutex
	tail []byte
	stop sync.Once
	// stderrRead is closed once stderr reached its end: every process
	// that held it is gone.
	stderrRead chan struct{}
}

// Start runs spec in its sandbox. The program is checked like a command
// tool's (found, executable); the sandbox is resolved like a tool's.
func (l *Launcher) Start(spec ProcessSpec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to start")
	}
	r, err := l.Runner(spec.Sandbox)
	if err != nil {
		return nil, err
	}
	program, err := r.LookPath(spec.Argv[0])
	if err != nil {
		return nil, err
	}
	dir, err := l.ResolveDir(spec.Dir)
	if err != nil {
		return nil, fmt.Errorf("cwd: %w", err)
	}
	p, err := l.start(context.Background(), r.sb, append([]string{program}, spec.Argv[1:]...), dir, true, RunNet{Tool: spec.Name})
	if err != nil {
		return nil, err
	}
	pr := &Process{Stdin: p.pipes.inW, Stdout: p.pipes.outR, k: p.k, cg: p.cg, net: p.net, tmp: p.tmp, sb: r.sb, done: make(chan struct{}),
		stderrRead: make(chan struct{})}
	go pr.collectStderr(p.pipes.errR)
	go func() {
		pr.err = p.cmd.Wait()
		close(pr.done)
	}()
	return pr, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended (nil for exit status 0); valid after Done.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stderr returns the end of what the process wrote to stderr, for logs and
// error messages. After Stop it holds everything the process wrote: why a
// server died is often the last thing it said.
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.tail)
}

func (p *Process) collectStderr(r *os.File) {
	defer close(p.stderrRead)
	defer r.Close()
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.tail = append(p.tail, buf[:n]...)
			if over := len(p.tail) - stderrTail; over > 0 {
				p.tail = append(p.tail[:0], p.tail[over:]...)
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// Stop ends the process: stdin is closed (MCP's polite shutdown), then
// after grace the whole tree gets SIGTERM, and SIGKILL after the sandbox's
// kill grace. It returns once the process is gone and its temporary
// directory removed; calling it again does nothing.
func (p *Process) Stop(grace time.Duration) {
	p.stop.Do(func() {
		_ = p.Stdin.Close()
		select {
		case <-p.done:
		case <-time.After(grace):
			p.k.stop(p.sb.grace, p.done)
		}
		// Descendants may outlive the leader, and fork while the group is
		// signalled: kill repeats until the group is empty, as for a run.
		p.k.kill()
		p.cg.remove()
		p.net.close()
		_ = p.Stdout.Close()
		_ = os.RemoveAll(p.tmp)
		// The tree is gone, so stderr ends: wait for its last bytes to be
		// read (bounded, should something outside the tree hold it).
		select {
		case <-p.stderrRead:
		case <-time.After(time.Second):
		}
	})
}
