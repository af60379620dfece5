package consult

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// cliProvider runs a CLI once per consultation in the command tools'
// sandbox.
type cliProvider struct {
	s      *spec
	runner *launch.Runner
}

// stderrTail is how much of a CLI's stderr a response keeps.
const stderrTail = 2000

// sandboxOf is the sandbox a CLI provider runs in: as configured, with the
// network on unless it says otherwise (a CLI calls its vendor) and its
// path as PATH unless env sets one; (as for every launch.Launcher.Runner)
// no address-space or CPU-time limit unless set.
func sandboxOf(sb Sandbox) launch.Sandbox {
	out := sb.Sandbox
	if out.Network == nil {
		out.Network = launch.NetworkOn()
	}
	out.Env = maps.Clone(sb.Env)
	if len(sb.Path) > 0 && out.Env["PATH"] == "" {
		if out.Env == nil {
			out.Env = map[string]string{}
		}
		out.Env["PATH"] = strings.Join(sb.Path, ":")
	}
	return out
}

// argv builds the command line: the program, the fixed arguments, the
// model flag, then the prompt when it goes as an argument.
func (c *cliProvider) argv(prompt, model string) ([]string, *string) {
	cfg := c.s.cfg
	argv := append([]string{cfg.Command}, cfg.Args...)
	if model != "" && cfg.ModelFlag != "" {
		argv = append(argv, cfg.ModelFlag, model)
	}
	if cfg.Prompt != "arg" {
		return argv, &prompt
	}
	switch f := cfg.PromptFlag; {
	case f == "":
		return append(argv, "--", prompt), nil
	case strings.HasSuffix(f, "="):
		return append(argv, f+prompt), nil
	default:
		return append(argv, f, prompt), nil
	}
}

func (c *cliProvider) ask(ctx context.Context, q query) outcome {
	argv, stdin := c.argv(q.prompt, q.model)
	var emit func(string, string)
	if q.emit != nil {
		emit = func(stream, data string) {
			if stream == "stdout" { // stderr is the CLI's progress and notices
				q.emit(data)
			}
		}
	}
	meta := map[string]any{"containment": c.runner.Containment(), "prompt_via": c.s.cfg.Prompt}
	res, err := c.runner.Run(ctx, launch.RunSpec{Argv: argv, Stdin: stdin, Timeout: q.timeout, Emit: emit,
		Net: launch.RunNet{Tool: "consult:" + c.s.name}})
	if err != nil {
		o := c.failed(ctx, err)
		o.meta = meta
		return o
	}
	o := c.read(res, q.timeout)
	if s := tail(res.Stderr, stderrTail); s != "" {
		meta["stderr"] = s
	}
	if res.Signal != "" {
		meta["signal"] = res.Signal
	}
	if res.InvalidUTF8 {
		meta["invalid_utf8"] = true
	}
	meta["duration_ms"] = res.DurationMS
	o.meta = meta
	return o
}

// failed: the CLI could not run to an end of its own.
func (c *cliProvider) failed(ctx context.Context, err error) outcome {
	switch {
	case errors.Is(err, launch.ErrNotFound):
		return outcome{status: StatusNotFound, err: fmt.Sprintf("%s is not installed: %v; install it, or name its "+
			"directory in the provider's sandbox.path", c.s.cfg.Command, err)}
	case ctx.Err() != nil:
		return ended(ctx)
	}
	if te, ok := tools.AsError(err); ok {
		return outcome{status: StatusError, err: te.Message}
	}
	return outcome{status: StatusError, err: err.Error()}
}

// read turns a run that ended into an outcome.
func (c *cliProvider) read(res *launch.Result, timeout time.Duration) outcome {
	switch {
	case res.TimedOut:
		return outcome{status: StatusTimeout, err: fmt.Sprintf("no answer within %v; the CLI was stopped", timeout.Round(time.Millisecond))}
	case res.Truncated:
		return outcome{status: StatusInvalidOutput, err: fmt.Sprintf("the CLI wrote more than %d bytes on %s, the cap "+
			"(sandbox.max_output_bytes, else commands.max_output_bytes); it was stopped", c.runner.MaxOutputBytes(),
			strings.Join(res.TruncatedStreams, " and "))}
	case res.Signal != "":
		return outcome{status: StatusError, err: withStderr("the CLI was killed by "+res.Signal, res.Stderr)}
	}
	code := res.ExitCode
	rd := readOutput(res.Stdout, c.s.cfg.Output, c.s.answer, c.s.errs)
	if code != 0 {
		msg := fmt.Sprintf("the CLI exited with status %d", code)
		if rd.failed != "" {
			msg += ": " + rd.failed
		} else {
			msg = withStderr(msg, res.Stderr)
		}
		return outcome{status: StatusError, err: msg, exitCode: &code, output: strings.TrimSpace(res.Stdout)}
	}
	switch {
	case rd.failed != "":
		return outcome{status: StatusError, err: "the CLI reported a failure: " + rd.failed, exitCode: &code}
	case rd.problem != "":
		return outcome{status: StatusInvalidOutput, err: rd.problem, exitCode: &code}
	}
	return outcome{status: StatusSuccess, output: rd.answer, exitCode: &code}
}

func withStderr(msg, stderr string) string {
	if s := tail(stderr, stderrTail); s != "" {
		return msg + ": " + s
	}
	return msg
}

func (c *cliProvider) probe(ctx context.Context, timeout time.Duration) availability {
	if _, err := c.runner.LookPath(c.s.cfg.Command); err != nil {
		return availability{Detail: "not installed: " + err.Error()}
	}
	a := availability{Installed: true}
	argv := append([]string{c.s.cfg.Command}, c.s.cfg.VersionArgs...)
	res, err := c.runner.Run(ctx, launch.RunSpec{Argv: argv, Timeout: timeout, Net: launch.RunNet{Tool: "consult:" + c.s.name}})
	check := strings.Join(argv, " ")
	switch {
	case err != nil:
		a.Detail = fmt.Sprintf("%s failed: %v", check, err)
	case res.TimedOut:
		a.Detail = fmt.Sprintf("%s did not answer within %v (timeouts.detection)", check, timeout)
	case !res.OK:
		a.Detail = withStderr(fmt.Sprintf("%s failed (exit %d, signal %q)", check, res.ExitCode, res.Signal), res.Stderr)
	default:
		a.Working = true
		out := strings.TrimSpace(res.Stdout)
		if out == "" {
			out = strings.TrimSpace(res.Stderr)
		}
		first, _, _ := strings.Cut(out, "\n")
		a.Version = tools.CutUTF8(strings.TrimSpace(first), 200)
	}
	return a
}

func (c *cliProvider) where() map[string]any {
	return map[string]any{"command": c.s.cfg.Command, "containment": c.runner.Containment()}
}
