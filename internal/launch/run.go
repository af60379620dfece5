package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/tracing"
)

// Result is how a run ended. A program that ran to its end is a result
// whatever its exit code: OK says whether the code is one of the run's
// success codes, and Stdout/Stderr carry what the caller needs to act on a
// failure. Only what prevents an answer is an error: a program that could
// not start, and the run's context ending.
type Result struct {
	// OK is true when the command exited with a success code.
	OK bool `json:"ok"`
	// ExitCode is the exit status, or -1 when a signal ended the command.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the command ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// TimedOut is set when the command outlived the "timeout" it was given
	// (execute_command) and was stopped. A call that outlives its own
	// deadline gets the envelope's timeout status instead.
	TimedOut bool `json:"timed_out"`
	// Truncated is set when stdout or stderr (TruncatedStreams says which)
	// reached its cap; the command was then stopped at once.
	Truncated        bool     `json:"truncated"`
	TruncatedStreams []string `json:"truncated_streams,omitempty"`
	Stdout           string   `json:"stdout"`
	Stderr           string   `json:"stderr"`
	// InvalidUTF8 is set when bytes that are not UTF-8 were replaced by U+FFFD.
	InvalidUTF8 bool    `json:"invalid_utf8,omitempty"`
	DurationMS  float64 `json:"duration_ms"`
	// Containment is how the command was isolated: namespaces, bwrap, or
	// "none (not isolated)" when the operator chose none.
	Containment string `json:"containment"`
	// Limits says, per limit (memory, processes, cpus, cpu_time,
	// address_space, file_size, open_files, tmp, descendants, syscalls), what
	// enforced it for this run, or that nothing did.
	Limits map[string]string `json:"limits"`
	// Network is what a run with an allow-list did through its egress
	// proxy: destinations reached, bytes, and each destination refused
	// with why (network.refused).
	Network *egress.Report `json:"network,omitempty"`
}

// runStats are facts about a run that tests assert and callers ignore.
type runStats struct {
	runID  string
	pid    int
	capHit time.Time // when a stream reached its cap
	exited time.Time // when the command's main process was reaped
}

// drainWait is how long the pipes may stay open after the main process
// exited (a grandchild holding them) before the tree is killed and the
// pipes closed: it bounds the call whatever the command left behind.
const drainWait = 100 * time.Millisecond

// run runs spec (Argv[0] absolute) in dir and collects its result. A ctx
// deadline or cancellation stops the whole tree (SIGTERM, SIGKILL after the
// grace) and is returned as an error wrapping ctx.Err().
func (l *Launcher) run(ctx context.Context, sb *sandbox, spec RunSpec, dir string) (*Result, runStats, error) {
	start := time.Now()
	var st runStats
	// With tracing on, the process is a span and learns it as TRACEPARENT:
	// an instrumented CLI's own spans join the call's trace.
	ctx, span := tracing.StartClient(ctx, "exec "+filepath.Base(spec.Argv[0]), semconv.ProcessExecutableName(filepath.Base(spec.Argv[0])))
	p, err := l.start(ctx, sb, spec.Argv, dir, spec.Stdin != nil, spec.Net, tracing.Env(ctx)...)
	if err != nil {
		tracing.End(span, true, "start")
		return nil, st, err
	}
	defer os.RemoveAll(p.tmp)
	defer p.pipes.closeAll()
	st.runID, st.pid = p.k.runID, p.k.pgid
	if spec.Stdin != nil {
		go func() { _, _ = io.WriteString(p.pipes.inW, *spec.Stdin); _ = p.pipes.inW.Close() }()
	}
	res, err := supervise(ctx, p.cmd, p.pipes, sb, spec, p.k, &st)
	// Whatever the command left running ends with the run, and so does
	// its proxy.
	p.cg.remove()
	report := p.net.close()
	endProcessSpan(span, res)
	if res != nil {
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		res.Containment, res.Limits, res.Network = sb.short(), sb.enforced, report
	}
	return res, st, err
}

// launched is a program started in a sandbox, its child's ends of the
// pipes closed. Its private temporary directory is the caller's to remove,
// with the pipes, once the program is gone.
type launched struct {
	cmd   *exec.Cmd
	pipes *pipes
	tmp   string     // "" under the minimal root: its /tmp goes with it
	k     *killer    // its process group, and its run's marker
	cg    *runCgroup // its cgroups, nil when there are none; the caller removes them
	net   *netRun    // its egress proxy, nil without an allow-list; the caller closes it
}

// start starts argv (argv[0] absolute) in dir under sb, as every program
// toold runs is started: a private TMPDIR (HOME too unless the sandbox sets
// it), TOOLD_RUN_ID marking its processes, the default PATH unless set, its
// own pipes (stdin: a pipe, else /dev/null), and the sandbox's launcher
// thread. On failure nothing is left behind.
func (l *Launcher) start(ctx context.Context, sb *sandbox, argv []string, dir string, stdin bool, rn RunNet, extraEnv ...string) (_ *launched, err error) {
	runID := newRunID()
	var tmp string
	undo := []func(){}
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if sb.tmpfsTmp() {
		tmp = "/tmp" // the run's own tmpfs
	} else {
		if tmp, err = l.tempDir(sb); err != nil {
			return nil, fmt.Errorf("creating the private temporary directory: %w", err)
		}
		undo = append(undo, func() { _ = os.RemoveAll(tmp) })
	}
	var nr *netRun
	if sb.egress != nil {
		if nr, err = l.openNet(ctx, sb, rn); err != nil {
			return nil, err
		}
		undo = append(undo, func() { nr.close() })
		sb = sb.withNet(nr)
	}
	rs, cg, release, err := l.prepareRun(sb, argv[0], runID, tmp)
	if err != nil {
		return nil, err
	}
	defer release()
	undo = append(undo, cg.remove)
	if nr != nil {
		if err := sb.attachNet(&rs); err != nil {
			return nil, err
		}
	}
	env := append([]string(nil), sb.env...)
	for _, v := range tmpVars {
		env = append(env, v+"="+tmp)
	}
	env = append(append(env, "TOOLD_RUN_ID="+runID), extraEnv...)
	if !hasVar(env, "HOME") {
		env = append(env, "HOME="+tmp)
	}
	if !hasVar(env, "PATH") {
		env = append(env, "PATH="+DefaultPath)
	}
	if nr != nil {
		env = netEnv(env, nr)
	}
	cmd := sb.command(argv, dir, l.host.workspace, tmp, env)
	p, err := openPipes(cmd, stdin)
	if err != nil {
		return nil, err
	}
	if err := sb.launcher.start(cmd, rs); err != nil {
		if cmd.Process != nil {
			_ = cmd.Wait()
		}
		p.closeAll()
		return nil, startError(argv[0], err)
	}
	p.closeChildEnds()
	nr.started()
	if sb.tmpfsTmp() {
		tmp = ""
	}
	return &launched{cmd: cmd, pipes: p, tmp: tmp, cg: cg, net: nr,
		k: &killer{proc: cmd.Process, pgid: cmd.Process.Pid, sweep: sb.sweeps(cg), runID: runID, cg: cg}}, nil
}

// supervise waits for the command, its output and its deadlines.
func supervise(ctx context.Context, cmd *exec.Cmd, p *pipes, sb *sandbox, spec RunSpec,
	k *killer, st *runStats) (*Result, error) {
	out := &stream{name: "stdout", max: sb.maxOut, emit: spec.Emit}
	errs := &stream{name: "stderr", max: sb.maxOut, emit: spec.Emit}
	full := make(chan string, 2)
	var wg sync.WaitGroup
	for _, x := range []struct {
		s *stream
		r *os.File
	}{{out, p.outR}, {errs, p.errR}} {
		wg.Add(1)
		go func() { defer wg.Done(); x.s.pump(x.r, func(n string) { full <- n }) }()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timeout, grace, hard <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	res := &Result{}
	var cause error
	done := ctx.Done()
	var ps *os.ProcessState // read only once Wait has returned
wait:
	for {
		select {
		case <-exited:
			ps = cmd.ProcessState
			break wait
		case <-hard:
			// Not even SIGKILL ended it (uninterruptible sleep): answer
			// anyway; the Wait goroutine reaps it whenever it dies.
			break wait
		case <-full:
			if st.capHit.IsZero() {
				st.capHit = time.Now()
			}
			k.kill()
		case <-done:
			cause, done = ctx.Err(), nil
			grace = k.term(sb.grace)
		case <-timeout:
			res.TimedOut, timeout = true, nil
			grace = k.term(sb.grace)
		case <-grace:
			grace, hard = nil, k.escalate()
		}
	}
	st.exited = time.Now()
	drain(&wg, p, k)
	res.fill(ps, out, errs, spec.SuccessCodes)
	if cause != nil {
		return nil, fmt.Errorf("command %s stopped: %w", spec.Argv[0], cause)
	}
	return res, nil
}

// drain waits a moment for the readers to see EOF; a descendant still
// holding the pipes then is killed and the pipes are closed under it.
func drain(wg *sync.WaitGroup, p *pipes, k *killer) {
	readers := make(chan struct{})
	go func() { wg.Wait(); close(readers) }()
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-readers:
	case <-t.C:
		k.kill()
		p.closeAll()
		<-readers
	}
	if k.sweep && (k.signalled || sweepAtEnd) {
		k.sweepMarked()
	}
}

func (r *Result) fill(ps *os.ProcessState, out, errs *stream, successes []int) {
	r.ExitCode = -1
	if ps != nil {
		ws, _ := ps.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			r.Signal = signalName(ws.Signal())
		} else {
			r.ExitCode = ws.ExitStatus()
		}
	}
	r.OK = ps != nil && r.Signal == "" && !r.TimedOut && contains(successes, r.ExitCode)
	var bad1, bad2 bool
	r.Stdout, bad1 = out.text()
	r.Stderr, bad2 = errs.text()
	r.InvalidUTF8 = bad1 || bad2
	for _, s := range []*stream{out, errs} {
		if s.truncated {
			r.Truncated = true
			r.TruncatedStreams = append(r.TruncatedStreams, s.name)
		}
	}
	if r.Truncated {
		r.OK = false
	}
}

func contains(codes []int, c int) bool {
	if len(codes) == 0 {
		return c == 0
	}
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

// pipes are the command's standard streams; toold keeps the read ends of
// stdout/stderr and the write end of stdin.
type pipes struct {
	outR, outW, errR, errW, inR, inW *os.File
	once                             sync.Once
}

func openPipes(cmd *exec.Cmd, stdin bool) (*pipes, error) {
	p := &pipes{}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err == nil {
		if p.errR, p.errW, err = os.Pipe(); err == nil && stdin {
			p.inR, p.inW, err = os.Pipe()
		}
	}
	if err != nil {
		p.closeAll()
		return nil, fmt.Errorf("creating pipes: %w", err)
	}
	// *os.File values are handed to the child as they are: no copying
	// goroutine in os/exec that Wait would have to wait for.
	cmd.Stdout, cmd.Stderr = p.outW, p.errW
	if stdin {
		cmd.Stdin = p.inR
	}
	return p, nil
}

func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.outW, p.errW, p.inR} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// closeAll closes every end; a Read or Write blocked on one returns.
func (p *pipes) closeAll() {
	p.once.Do(func() {
		for _, f := range []*os.File{p.outR, p.outW, p.errR, p.errW, p.inR, p.inW} {
			if f != nil {
				_ = f.Close()
			}
		}
	})
}

// killer stops a command's process tree. Ending it escalates: term, then
// escalate when term's grace passes, then giving up when escalate's wait
// passes, each step skipped once the process has exited; supervise runs
// the steps among a run's other events, stop runs them alone. How a
// signal reaches the tree is the platform's (terminate and killGroup).
type killer struct {
	cg        *runCgroup // when set, killing ends the whole cgroup
	proc      *os.Process
	pgid      int
	sweep     bool // containment none: also find escaped processes by marker
	runID     string
	signalled bool
}

// killWait is how long toold waits for a process group to go after
// SIGKILL. Past it (a process in uninterruptible sleep) toold goes on
// without it; it is reaped whenever it dies.
const killWait = 2 * time.Second

// term asks the tree to end and returns when to follow with kill.
func (k *killer) term(grace time.Duration) <-chan time.Time {
	k.signalled = true
	k.terminate()
	return time.After(grace)
}

// escalate kills the tree and returns when to stop waiting for it to go.
func (k *killer) escalate() <-chan time.Time {
	k.kill()
	return time.After(killWait)
}

// stop ends the group: SIGTERM, SIGKILL after grace, each step skipped once
// exited is closed. It returns when exited is closed or killWait after
// SIGKILL.
func (k *killer) stop(grace time.Duration, exited <-chan struct{}) {
	t := k.term(grace)
	select {
	case <-exited:
	case <-t:
		select {
		case <-exited:
		case <-k.escalate():
		}
	}
}

// kill ends the whole tree at once: the process group (killGroup), the
// run's cgroups, and under none the processes that left the group but
// carry the run's marker.
func (k *killer) kill() {
	k.signalled = true
	k.killGroup()
	k.cg.kill()
	if k.sweep {
		k.sweepMarked()
	}
}

// tempDir makes the run's private temporary directory, owned by the uid
// the command runs as.
func (l *Launcher) tempDir(sb *sandbox) (string, error) {
	dir, err := os.MkdirTemp(l.tmpBase, "run-")
	if err != nil {
		return "", err
	}
	if sb.drop {
		if err := os.Chown(dir, sb.uid, sb.gid); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	if err := sb.ownTemp(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			return true
		}
	}
	return false
}

func newRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// endProcessSpan closes a run's span with the process's exit code (-1:
// killed by a signal, or stopped with the call). A non-zero exit is a
// result, not a failure of the call, but it marks the span failed, as the
// process conventions do.
func endProcessSpan(span trace.Span, res *Result) {
	if span == nil {
		return
	}
	code := -1
	if res != nil {
		code = res.ExitCode
	}
	tracing.End(span, code != 0, strconv.Itoa(code), semconv.ProcessExitCode(code))
}
