package command

import (
	"context"
	"errors"
	"time"
)

// Runner runs one-shot programs in a sandbox resolved once, for tool kinds
// that start a program per call but are not command tools themselves (the
// consultation providers). A run gets everything a command tool's run
// gets: containment, the environment allow-list, rlimits, a private
// TMPDIR, output caps, and the whole tree killed on timeout or cancel —
// but no CPU-time or address-space limit unless its Sandbox sets one.
// Safe for concurrent use.
type Runner struct {
	set  *Set
	sb   *sandbox
	path string
}

// RunSpec is one run of a Runner.
type RunSpec struct {
	// Argv is the command line; Argv[0] is looked up on the sandbox's PATH
	// at each run, so a program installed later is found.
	Argv []string
	// Dir is the working directory, relative to the workspace ("" is the
	// workspace itself).
	Dir string
	// Stdin, when set, is written to the program's standard input, which
	// is then closed; nil gives it /dev/null.
	Stdin *string
	// Timeout is the program's own bound: when it passes the tree is
	// stopped and the result says TimedOut. Zero: only ctx bounds it.
	Timeout time.Duration
	// Emit, when set, receives the output as it arrives, as valid UTF-8,
	// with the stream it came from ("stdout" or "stderr").
	Emit func(stream, data string)
}

// Runner resolves a sandbox for runs, as a command tool's is resolved.
// Call it while wiring: resolving may start a containment launcher.
func (s *Set) Runner(c Sandbox) (*Runner, error) {
	sb, err := s.programSandbox(c)
	if err != nil {
		return nil, err
	}
	return &Runner{set: s, sb: sb, path: envPath(sb.env)}, nil
}

// Containment describes the sandbox, as discovery shows a command tool's.
func (r *Runner) Containment() string { return r.sb.describe() }

// MaxOutputBytes is the cap on each of a run's stdout and stderr: the
// Sandbox's, else the commands section's, else the default. A caller
// reporting a truncated run names this rather than recomputing it.
func (r *Runner) MaxOutputBytes() int { return r.sb.maxOut }

// LookPath finds a program as a run would: an absolute path that is
// executable, or a bare name on the sandbox's PATH.
func (r *Runner) LookPath(program string) (string, error) {
	return findProgram(program, r.path)
}

// ErrNotFound is what Run's error is (errors.Is) when Argv[0] is not
// found; the error's message says where it was looked for.
var ErrNotFound = errors.New("program not found")

type notFound struct{ err error }

func (e *notFound) Error() string        { return e.err.Error() }
func (e *notFound) Unwrap() error        { return e.err }
func (e *notFound) Is(target error) bool { return target == ErrNotFound }

// Run runs spec and returns its result. A non-zero exit, a timeout of its
// own and output past the cap are results; a program that is not found
// (ErrNotFound), cannot be started, or is stopped because ctx ended are
// errors, the last wrapping ctx.Err().
func (r *Runner) Run(ctx context.Context, spec RunSpec) (*Result, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	program, err := r.LookPath(spec.Argv[0])
	if err != nil {
		return nil, &notFound{err}
	}
	dir, err := resolveDir(r.set.host.workspace, spec.Dir)
	if err != nil {
		return nil, err
	}
	req := runReq{argv: append([]string{program}, spec.Argv[1:]...), dir: dir, stdin: spec.Stdin,
		timeout: spec.Timeout, emit: spec.Emit}
	res, _, err := r.set.run(ctx, nil, r.sb, req)
	return res, err
}
