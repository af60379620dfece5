package command

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// Result is what every command tool returns. A command that ran to its end
// is a result whatever its exit code: "ok" says whether the code is one of
// the tool's success codes, and stdout/stderr carry what the model needs to
// act on a failure. Only what prevents an answer is an error: a refused or
// invalid call (user/permission/security error) and the call's own deadline
// or cancellation (the envelope's "timeout").
type Result struct {
	launch.Result
	// Parsed is stdout parsed as the tool declares (json: the value; lines:
	// an array of strings); ParseError says why it could not be.
	Parsed     any    `json:"parsed,omitempty"`
	ParseError string `json:"parse_error,omitempty"`
}

// run runs one command of a tool through its runner: its output streamed
// when the caller streams, a start failure answered as a tool error.
func run(ctx context.Context, r *launch.Runner, call *tools.Call, spec launch.RunSpec) (*Result, error) {
	if call != nil && call.Streaming() {
		spec.Emit = call.Emit
	}
	res, err := r.Run(ctx, spec)
	if err != nil {
		return nil, toolError(spec.Argv[0], err)
	}
	return &Result{Result: *res}, nil
}

// toolError answers a launch failure as the tool error a model (or the
// operator) can act on; the run's own deadline passes through.
func toolError(program string, err error) error {
	var le *launch.Error
	if !errors.As(err, &le) {
		return err
	}
	switch le.Kind {
	case launch.NotFound:
		return tools.NewUserError("program %s was not found", program).Wrap(err).
			WithSuggestion("ask the operator to install it or fix the tool's configuration")
	case launch.Permission:
		return tools.NewPermissionError("%s", le.Msg).Wrap(err).
			WithSuggestion("the operator must make the program and the workspace (every directory down to it) readable and searchable by the uid commands run as (commands.run_as, default 65534)")
	case launch.Closed:
		return tools.Errorf(tools.OverloadError, "%s", le.Msg).Wrap(err).WithSuggestion("retry shortly")
	case launch.Retired:
		return tools.Errorf(tools.SystemError, "%s", le.Msg).Wrap(err).WithCode(tools.CodeSandboxFailed).
			WithSuggestion("tell the operator: toold's log says why")
	case launch.Outside:
		te := tools.NewSecurityError("%s", le.Msg).Wrap(err).WithCode(tools.CodeOutsideWorkspace)
		if le.Hint != "" {
			te = te.WithSuggestion("%s", le.Hint)
		}
		return te
	case launch.NoDirectory:
		return tools.NewUserError("%s", le.Msg).Wrap(err)
	}
	return err
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
		te = tools.NewUserError("%s outlived its timeout and was stopped", name).WithCode(tools.CodeTimedOut).
			WithSuggestion("give it a longer timeout, or a command that does less")
	case r.Truncated:
		te = tools.NewUserError("%s wrote more than its output cap to %s and was stopped", name, strings.Join(r.TruncatedStreams, " and ")).
			WithCode(tools.CodeOutputTruncated).WithSuggestion("narrow the command's output (fewer files, a filter, a quieter flag)")
	case r.Signal != "":
		te = tools.NewUserError("%s was killed by %s", name, r.Signal).WithCode(tools.CodeKilled).
			WithSuggestion("read stderr in data; a memory, process or CPU limit may have stopped it (see limits in data)")
	default:
		te = tools.NewUserError("%s exited with code %d", name, r.ExitCode).WithCode(tools.CodeExitStatus).
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
