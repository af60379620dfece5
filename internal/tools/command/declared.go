package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// declared is a command tool from the configuration.
type declared struct {
	set       *Set
	spec      tools.Spec
	argv      *argv
	workdir   string // relative to the workspace, resolved at each run
	stdin     string
	successes []int
	output    string
	r         *launch.Runner
	defaults  map[string]any
	git       bool      // the program is git: its arguments get gitGuards
	gitOpts   GitConfig // what the tool's git may do beyond them
}

var _ tools.Tool = (*declared)(nil)

// emptyParameters is the schema of a tool without parameters.
var emptyParameters = []byte(`{"type":"object","properties":{},"additionalProperties":false}`)

func (s *Set) declared(tc ToolConfig) (tools.Tool, error) {
	if !tools.NamePattern.MatchString(tc.Name) {
		return nil, fmt.Errorf("name must match %s", tools.NamePattern)
	}
	params := emptyParameters
	if tc.Parameters != nil {
		var err error
		if params, err = json.Marshal(tc.Parameters); err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
	}
	known, err := propertyNames(params)
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	av, err := compileArgv(tc.Argv)
	if err != nil {
		return nil, err
	}
	if err := checkNames(tc, known); err != nil {
		return nil, err
	}
	if av.program, err = launch.FindProgram(av.program, launch.PathOf(tc.Sandbox.Sandbox)); err != nil {
		return nil, err
	}
	git := isGit(av.program)
	if git {
		tc.Env = gitEnv(s.l.Workspace(), tc.Env)
	}
	r, err := s.l.CommandRunner(tc.Sandbox.Sandbox)
	if err != nil {
		return nil, err
	}
	if _, err := s.l.ResolveDir(tc.Workdir); err != nil {
		return nil, fmt.Errorf("workdir: %w", err)
	}
	defaults, err := tools.SchemaDefaults(params)
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	examples, err := tools.ExamplesOf(tc.Examples)
	if err != nil {
		return nil, err
	}
	d := &declared{set: s, argv: av, workdir: tc.Workdir, stdin: tc.Stdin, successes: tc.SuccessCodes,
		output: tc.Output, r: r, defaults: defaults, git: git, gitOpts: tc.Git}
	d.spec = tools.Spec{Name: tc.Name, Description: tc.Description, Instructions: tc.Instructions,
		Returns: returnsText, Category: tools.SystemCommand, Parameters: params, Output: resultSchema(),
		Examples: examples, Confirmation: tools.ConfirmedIf(tc.RequiresConfirmation), Limits: tc.Limits.Limits(),
		Containment: r.Containment(), Effects: commandEffects(tc, r.Network()), MaxResultBytes: tools.ResultBudget(tc.MaxResultBytes)}
	return d, nil
}

// commandEffects: a command may change anything its sandbox lets it reach,
// unless the operator declared it read-only; with the network on it
// reaches the outside world.
func commandEffects(tc ToolConfig, network bool) tools.Effects {
	return tools.Effects{ReadOnly: tc.ReadOnly, Destructive: !tc.ReadOnly,
		Idempotent: tc.ReadOnly || tc.Idempotent, OpenWorld: network}
}

// returnsText describes Result for models.
const returnsText = "ok, exit_code, signal, timed_out, truncated, stdout, stderr, duration_ms, and parsed " +
	"(stdout parsed as JSON or lines, when the tool says so). A command that fails (an exit code that is not a " +
	"success code, a signal, its timeout, its output cap) fails the call with error.type user_error and a code " +
	"(exit_status, killed, timed_out, output_truncated); data still holds this result: read stderr."

func (d *declared) Spec() tools.Spec { return d.spec }

// Execute renders the argv from the arguments and runs it.
func (d *declared) Execute(ctx context.Context, call *tools.Call) (any, error) {
	params, err := decodeParams(call.Args, d.defaults)
	if err != nil {
		return nil, err
	}
	args, err := d.argv.render(params)
	if err != nil {
		return nil, err
	}
	if d.git {
		guarded, err := d.set.guardedGit(args[0], d.workdir, args[1:], d.gitOpts)
		if err != nil {
			return nil, err
		}
		args = append(args[:1:1], guarded...)
	}
	spec := launch.RunSpec{Argv: args, Dir: d.workdir, SuccessCodes: d.successes, Net: launch.RunNet{Tool: d.spec.Name}}
	if d.stdin != "" {
		if v, ok := params[d.stdin]; ok {
			str, ok := v.(string)
			if !ok {
				return nil, tools.Errorf(tools.ValidationError, "%s must be a string (it is the command's input)", d.stdin)
			}
			spec.Stdin = &str
		}
	}
	res, err := run(ctx, d.r, call, spec)
	if err != nil {
		return nil, err
	}
	res.parse(d.output)
	return res.outcome(args[0])
}

// parse fills Parsed from stdout.
func (r *Result) parse(mode string) {
	switch mode {
	case "json":
		if r.Truncated {
			r.ParseError = "stdout was truncated, so it is not parsed"
			return
		}
		if strings.TrimSpace(r.Stdout) == "" {
			return
		}
		dec := json.NewDecoder(strings.NewReader(r.Stdout))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			r.ParseError = "stdout is not JSON: " + err.Error()
			return
		}
		if _, err := dec.Token(); err == nil {
			r.ParseError = "stdout holds more than one JSON value"
			return
		}
		r.Parsed = v
	case "lines":
		lines := []string{}
		if r.Stdout != "" {
			lines = strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
		}
		r.Parsed = lines
	}
}

func resultSchema() json.RawMessage {
	s, err := tools.SchemaFor(reflect.TypeFor[Result](), true)
	if err != nil {
		panic("command: Result has no schema: " + err.Error())
	}
	return s
}

// propertyNames returns the top-level properties of a parameters schema.
func propertyNames(schema []byte) (map[string]bool, error) {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, errors.New(`the schema must say "type": "object"`)
	}
	names := map[string]bool{}
	for n := range s.Properties {
		names[n] = true
	}
	return names, nil
}

// checkNames refuses when/splice/stdin naming a parameter that does not
// exist: a typo would otherwise silently drop an argument.
func checkNames(tc ToolConfig, known map[string]bool) error {
	for i, a := range tc.Argv {
		for _, n := range []string{a.When, a.Splice} {
			if n != "" && !known[n] {
				return fmt.Errorf("argv[%d]: %q is not a parameter", i, n)
			}
		}
	}
	if tc.Stdin != "" && !known[tc.Stdin] {
		return fmt.Errorf("stdin: %q is not a parameter", tc.Stdin)
	}
	return nil
}
