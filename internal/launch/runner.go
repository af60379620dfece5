package launch

import (
	"context"
	"errors"
	"time"
)

// Runner runs one-shot programs in a sandbox resolved once: a command
// tool's runs, a consultation CLI's. A run gets containment, the
// environment allow-list, rlimits, a private TMPDIR, output caps, and the
// whole tree killed on timeout or cancel. Safe for concurrent use.
type Runner struct {
	l    *Launcher
	sb   *sandbox
	path string
}

// RunSpec is one run of a Runner.
type RunSpec struct {
	// Argv is the command line; Argv[0] is an absolute path, or a bare
	// name looked up on the sandbox's PATH at each run, so a program
	// installed later is found.
	Argv []string
	// Dir is the working directory, relative to the workspace ("" is the
	// workspace itself); it is resolved at each run (Launcher.ResolveDir).
	Dir string
	// Stdin, when set, is written to the program's standard input, which
	// is then closed; nil gives it /dev/null.
	Stdin *string
	// Timeout is the program's own bound: when it passes the tree is
	// stopped and the result says TimedOut. Zero: only ctx bounds it.
	Timeout time.Duration
	// SuccessCodes are the exit codes that make Result.OK (default [0]).
	SuccessCodes []int
	// Emit, when set, receives the output as it arrives, as valid UTF-8,
	// with the stream it came from ("stdout" or "stderr").
	Emit func(stream, data string)
	// Net is what the run's egress proxy needs (a sandbox with an
	// allow-list): the tool's name for the metrics, and the call's
	// principal's credentials for ${user:NAME}.
	Net RunNet
}

// Containment describes the sandbox in one phrase, as discovery shows a
// command tool's and the start-up log says it.
func (r *Runner) Containment() string { return r.sb.describe() }

// Network says whether the sandbox's programs reach the network (all of
// it, or an allow-list).
func (r *Runner) Network() bool { return r.sb.network || r.sb.egress != nil }

// MaxOutputBytes is the cap on each of a run's stdout and stderr: the
// Sandbox's, else the Config's, else the default. A caller reporting a
// truncated run names this rather than recomputing it.
func (r *Runner) MaxOutputBytes() int { return r.sb.maxOut }

// LookPath finds a program as a run would: an absolute path that is
// executable, or a bare name on the sandbox's PATH. A failure is an
// *Error of kind NotFound.
func (r *Runner) LookPath(program string) (string, error) {
	p, err := FindProgram(program, r.path)
	if err != nil {
		return "", &Error{Kind: NotFound, Msg: err.Error(), Err: err}
	}
	return p, nil
}

// Run runs spec and returns its result. A non-zero exit, a timeout of its
// own and output past the cap are results; a program that is not found
// (ErrNotFound), cannot be started (an *Error) or is stopped because ctx
// ended are errors, the last wrapping ctx.Err().
func (r *Runner) Run(ctx context.Context, spec RunSpec) (*Result, error) {
	res, _, err := r.run(ctx, spec)
	return res, err
}

func (r *Runner) run(ctx context.Context, spec RunSpec) (*Result, runStats, error) {
	if len(spec.Argv) == 0 {
		return nil, runStats{}, errors.New("no program to run")
	}
	program, err := r.LookPath(spec.Argv[0])
	if err != nil {
		return nil, runStats{}, err
	}
	dir, err := r.l.ResolveDir(spec.Dir)
	if err != nil {
		return nil, runStats{}, err
	}
	spec.Argv = append([]string{program}, spec.Argv[1:]...)
	return r.l.run(ctx, r.sb, spec, dir)
}
