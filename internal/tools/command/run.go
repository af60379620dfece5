package command

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// Result is what every command tool returns. A command that ran to its end
// is a result whatever its exit code: "ok" says whether the code is one of
// the tool's success codes, and stdout/stderr carry what the model needs to
// act on a failure. Only what prevents an answer is an error: a refused or
// invalid call (user/permission/security error) and the call's own deadline
// or cancellation (the envelope's "timeout").
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
	// Parsed is stdout parsed as the tool declares (json: the value; lines:
	// an array of strings); ParseError says why it could not be.
	Parsed     any    `json:"parsed,omitempty"`
	ParseError string `json:"parse_error,omitempty"`
	// Containment is how the command was isolated: namespaces, bwrap, or
	// "none (not isolated)" when the operator chose none.
	Containment string `json:"containment"`
	// Limits says, per limit (memory, processes, cpus, cpu_time,
	// address_space, file_size, open_files, tmp, descendants), what
	// enforced it for this run, or that nothing did.
	Limits map[string]string `json:"limits"`
}

// runReq is one command to run in a sandbox.
type runReq struct {
	argv      []string // argv[0] absolute
	dir       string   // absolute, inside the workspace
	stdin     *string
	timeout   time.Duration // the command's own timeout; 0: the call's deadline only
	successes []int
	// emit receives the output as it arrives (stream "stdout" or
	// "stderr"); nil: the call's Emit when someone streams.
	emit func(stream, data string)
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

// run runs one command and collects its result. A ctx deadline or
// cancellation stops the whole tree (SIGTERM, SIGKILL after the grace) and
// is returned as an error wrapping ctx.Err().
func (s *Set) run(ctx context.Context, call *tools.Call, sb *sandbox, req runReq) (*Result, runStats, error) {
	start := time.Now()
	var st runStats
	// With tracing on, the process is a span and learns it as TRACEPARENT:
	// an instrumented CLI's own spans join the call's trace.
	ctx, span := tracing.StartClient(ctx, "exec "+filepath.Base(req.argv[0]), semconv.ProcessExecutableName(filepath.Base(req.argv[0])))
	l, err := s.launch(sb, req.argv, req.dir, req.stdin != nil, tracing.Env(ctx)...)
	if err != nil {
		tracing.End(span, true, "start")
		return nil, st, err
	}
	defer os.RemoveAll(l.tmp)
	defer l.pipes.closeAll()
	st.runID, st.pid = l.k.runID, l.k.pgid
	if req.stdin != nil {
		go func() { _, _ = io.WriteString(l.pipes.inW, *req.stdin); _ = l.pipes.inW.Close() }()
	}
	emit := req.emit
	if emit == nil && call != nil && call.Streaming() {
		emit = call.Emit
	}
	res, err := supervise(ctx, l.cmd, l.pipes, sb, req, emit, l.k, &st)
	// Whatever the command left running ends with the run.
	l.cg.remove()
	endProcessSpan(span, res)
	if res != nil {
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		res.Containment, res.Limits = sb.short(), sb.enforced
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
}

// launch starts argv (argv[0] absolute) in dir under sb, as a command tool
// and every other program toold runs are started: a private TMPDIR (HOME
// too unless the sandbox sets it), TOOLD_RUN_ID marking its processes, the
// default PATH unless set, its own pipes (stdin: a pipe, else /dev/null),
// and the sandbox's launcher. On failure nothing is left behind.
func (s *Set) launch(sb *sandbox, argv []string, dir string, stdin bool, extraEnv ...string) (l *launched, err error) {
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
	var mounts *callMounts
	if sb.tmpfsTmp() {
		tmp = "/tmp" // the run's own tmpfs
		if mounts, err = sb.runMounts(argv[0], s.host.workspace); err != nil {
			return nil, fmt.Errorf("preparing the run's file system: %w", err)
		}
		if mounts != nil {
			defer closeTrees(mounts.trees) // attached or not, the descriptors go
		}
	} else {
		if tmp, err = s.tempDir(sb); err != nil {
			return nil, fmt.Errorf("creating the private temporary directory: %w", err)
		}
		undo = append(undo, func() { _ = os.RemoveAll(tmp) })
	}
	var cg *runCgroup
	var cgProcs []int
	if sb.cg.usable() {
		if cg, err = sb.cg.newRun(sb.call); err != nil {
			return nil, err
		}
		undo = append(undo, cg.remove)
		if cgProcs, err = cg.procsFiles(); err != nil {
			return nil, err
		}
		defer closeFDs(cgProcs)
	}
	env := append(append(append([]string(nil), sb.env...), "TMPDIR="+tmp, "TOOLD_RUN_ID="+runID), extraEnv...)
	if !hasVar(env, "HOME") {
		env = append(env, "HOME="+tmp)
	}
	if !hasVar(env, "PATH") {
		env = append(env, "PATH="+defaultPath)
	}
	cmd := sb.command(argv, dir, s.host.workspace, tmp, env)
	p, err := openPipes(cmd, stdin)
	if err != nil {
		return nil, err
	}
	if err := sb.launcher.start(cmd, runSetup{limits: sb.launcherLimits(), mounts: mounts, cgProcs: cgProcs}); err != nil {
		if cmd.Process != nil {
			_ = cmd.Wait()
		}
		p.closeAll()
		return nil, startError(argv[0], err)
	}
	p.closeChildEnds()
	if sb.tmpfsTmp() {
		tmp = ""
	}
	return &launched{cmd: cmd, pipes: p, tmp: tmp, cg: cg,
		k: &killer{pgid: cmd.Process.Pid, sweep: sb.mode == ModeNone && cg == nil, runID: runID, cg: cg}}, nil
}

// supervise waits for the command, its output and its deadlines.
func supervise(ctx context.Context, cmd *exec.Cmd, p *pipes, sb *sandbox, req runReq,
	emit func(string, string), k *killer, st *runStats) (*Result, error) {
	out := &stream{name: "stdout", max: sb.maxOut, emit: emit}
	errs := &stream{name: "stderr", max: sb.maxOut, emit: emit}
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
	if req.timeout > 0 {
		t := time.NewTimer(req.timeout)
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
			k.kill(unix.SIGKILL)
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
	res.fill(ps, out, errs, req.successes)
	if cause != nil {
		return nil, fmt.Errorf("command %s stopped: %w", req.argv[0], cause)
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
		k.kill(unix.SIGKILL)
		p.closeAll()
		<-readers
	}
	if k.sweep && k.signalled {
		k.sweepMarked()
	}
}

func (r *Result) fill(ps *os.ProcessState, out, errs *stream, successes []int) {
	r.ExitCode = -1
	if ps != nil {
		ws, _ := ps.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			r.Signal = unix.SignalName(ws.Signal())
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

// outcome is the call's answer for a finished run: the result when the
// command succeeded; otherwise a user_error (the model can read why and
// act) that carries the result as the envelope's data, so a failing
// command is never reported as a success, and its output is not lost.
// The message names what went wrong and ends with the last lines of
// stderr (of stdout when stderr is empty), for a reader who sees only
// the error.
func (r *Result) outcome(program string) (any, error) {
	if r.OK {
		return r, nil
	}
	name := filepath.Base(program)
	var te *tools.Error
	switch {
	case r.TimedOut:
		te = tools.NewUserError("%s outlived its timeout and was stopped", name).WithCode("timed_out").
			WithSuggestion("give it a longer timeout, or a command that does less")
	case r.Truncated:
		te = tools.NewUserError("%s wrote more than its output cap to %s and was stopped", name, strings.Join(r.TruncatedStreams, " and ")).
			WithCode("output_truncated").WithSuggestion("narrow the command's output (fewer files, a filter, a quieter flag)")
	case r.Signal != "":
		te = tools.NewUserError("%s was killed by %s", name, r.Signal).WithCode("killed").
			WithSuggestion("read stderr in data; a memory, process or CPU limit may have stopped it (see limits in data)")
	default:
		te = tools.NewUserError("%s exited with code %d", name, r.ExitCode).WithCode("exit_status").
			WithSuggestion("read stdout and stderr in data, fix the arguments or the workspace, and call again")
	}
	if tail := lastLines(cmp.Or(r.Stderr, r.Stdout), 5, 512); tail != "" {
		te.Message += "; its output ends:\n" + tail
	}
	return nil, te.WithResult(r)
}

// lastLines is the end of s: at most n lines and about max bytes, cut at a
// line (or, for one long line, a rune) boundary, without the final line
// break.
func lastLines(s string, n, max int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > max {
		s = tools.TailUTF8(s, max)
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	for i, k := len(s), 0; i > 0; i-- {
		if s[i-1] == '\n' {
			if k++; k == n {
				return s[i:]
			}
		}
	}
	return s
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
// the steps among a run's other events, stop runs them alone.
type killer struct {
	cg        *runCgroup // when set, killing ends the whole cgroup
	pgid      int
	sweep     bool // containment none: also find escaped processes by marker
	runID     string
	signalled bool
}

// killWait is how long toold waits for a process group to go after
// SIGKILL. Past it (a process in uninterruptible sleep) toold goes on
// without it; it is reaped whenever it dies.
const killWait = 2 * time.Second

// term sends SIGTERM to the group and returns when to follow with SIGKILL.
func (k *killer) term(grace time.Duration) <-chan time.Time {
	k.signalled = true
	_ = unix.Kill(-k.pgid, unix.SIGTERM)
	return time.After(grace)
}

// escalate sends SIGKILL to the group and returns when to stop waiting for
// it to go.
func (k *killer) escalate() <-chan time.Time {
	k.kill(unix.SIGKILL)
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

// kill sends sig to the whole process group until it is empty: a fork
// bomb may add members while the first signal is delivered. Under
// namespaces the group holds the namespace's init, whose death kills every
// process in the namespace; under bwrap it holds bwrap, whose sandbox dies
// with it (--die-with-parent).
func (k *killer) kill(sig unix.Signal) {
	k.signalled = true
	for range 50 {
		if err := unix.Kill(-k.pgid, sig); err != nil {
			break // ESRCH: nobody left in the group
		}
		time.Sleep(time.Millisecond)
	}
	if sig == unix.SIGKILL {
		k.cg.kill()
	}
	if k.sweep {
		k.sweepMarked()
	}
}

// sweepMarked kills processes that left the group (setsid) but still carry
// the run's TOOLD_RUN_ID: containment none has no namespace to end them.
// Best effort: a process that cleared its environment escapes it.
func (k *killer) sweepMarked() {
	marker := []byte("\x00TOOLD_RUN_ID=" + k.runID + "\x00")
	for range 3 {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, env...), marker) {
				continue
			}
			found = true
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// tempDir makes the run's private temporary directory, owned by the uid
// the command runs as.
func (s *Set) tempDir(sb *sandbox) (string, error) {
	dir, err := os.MkdirTemp(s.tmpBase, "run-")
	if err != nil {
		return "", err
	}
	if sb.drop {
		if err := os.Chown(dir, sb.uid, sb.gid); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

func startError(program string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tools.NewUserError("program %s was not found", program).Wrap(err).
			WithSuggestion("ask the operator to install it or fix the tool's configuration")
	case errors.Is(err, fs.ErrPermission):
		// The kernel says EACCES both for the program and for the working
		// directory; under a dropped uid the directory is the usual cause.
		return tools.NewPermissionError("program %s could not be started: permission denied", program).Wrap(err).
			WithSuggestion("the operator must make the program and the workspace (every directory down to it) readable and searchable by the uid commands run as (commands.run_as, default 65534)")
	case errors.Is(err, errClosed):
		return tools.Errorf(tools.OverloadError, "toold is shutting down").Wrap(err).WithSuggestion("retry shortly")
	case errors.Is(err, errRetired):
		return tools.Errorf(tools.SystemError, "the command sandbox failed and was stopped; command tools need toold restarted").
			Wrap(err).WithCode("sandbox_failed").WithSuggestion("tell the operator: toold's log says why")
	}
	return fmt.Errorf("starting %s: %w", program, err)
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
