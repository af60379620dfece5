package command

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// ExecuteCommandName is the general command tool's name.
const ExecuteCommandName = "execute_command"

// DefaultMaxTimeout caps execute_command's timeout argument by default.
const DefaultMaxTimeout = 30 * time.Second

// execTool is execute_command: a program of the allow-list with arguments
// checked against its rule.
type execTool struct {
	set        *Set
	spec       tools.Spec
	r          *launch.Runner
	programs   map[string]program
	maxTimeout time.Duration
}

type program struct {
	path string
	rule ProgramRule
	opts *optTable
}

var _ tools.Tool = (*execTool)(nil)

func (s *Set) executeTool(c ExecConfig) (tools.Tool, error) {
	if len(c.Programs) == 0 {
		return nil, fmt.Errorf("programs: the allow-list is empty")
	}
	path := strings.Join(c.Path, ":")
	if path == "" {
		path = launch.DefaultPath
	}
	sbc := c.Sandbox
	if sbc.Env["PATH"] == "" { // the lookup path is the command's PATH too
		sbc.Env = maps.Clone(sbc.Env)
		if sbc.Env == nil {
			sbc.Env = map[string]string{}
		}
		sbc.Env["PATH"] = path
	}
	t := &execTool{set: s, programs: map[string]program{}, maxTimeout: c.MaxTimeout}
	if t.maxTimeout <= 0 {
		t.maxTimeout = DefaultMaxTimeout
	}
	names := make([]string, 0, len(c.Programs))
	for name, rule := range c.Programs {
		if name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("programs: %q must be a bare program name", name)
		}
		p := rule.Path
		if p == "" {
			p = name
		}
		abs, err := launch.FindProgram(p, path)
		if err != nil {
			return nil, fmt.Errorf("programs.%s: %w", name, err)
		}
		opts, err := compileOptions(rule.Options)
		if err != nil {
			return nil, fmt.Errorf("programs.%s: %w", name, err)
		}
		t.programs[name] = program{path: abs, rule: rule, opts: opts}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, p := range t.programs {
		if isGit(p.path) {
			sbc.Env = gitEnv(s.l.Workspace(), sbc.Env)
			break
		}
	}
	r, err := s.l.CommandRunner(sbc.Sandbox)
	if err != nil {
		return nil, err
	}
	t.r = r
	t.spec = tools.Spec{
		Name:        ExecuteCommandName,
		Description: "Runs one program of an allow-list with the given arguments and returns its exit code, stdout and stderr. No shell is involved.",
		Instructions: "Use it when no specific tool fits. Allowed programs: " + strings.Join(names, ", ") +
			". Pass the command as an array of arguments (preferred) or as one string split like a shell would, " +
			"but without pipes, redirections, variables or globs. Options (arguments starting with -) must be on the " +
			"program's allow-list; operands that look like options are protected with --. Every call needs confirmation.",
		Returns:      returnsText,
		Category:     tools.SystemCommand,
		Parameters:   execParameters(t.maxTimeout),
		Output:       resultSchema(),
		Confirmation: execConfirmation(c.Confirmation),
		Effects:      tools.Effects{Destructive: true, OpenWorld: r.Network()},
		Limits:       c.Limits.Limits(),
		Containment:  r.Containment(),
		Examples: []tools.Example{{Description: "list a directory",
			Arguments: json.RawMessage(`{"command":["` + names[0] + `"],"cwd":"."}`)}},
	}
	return t, nil
}

// execConfirmation: a person approves every call unless the operator
// chose the token flow, where the host asks its user.
func execConfirmation(c string) tools.Confirmation {
	if c == string(tools.ConfirmToken) {
		return tools.ConfirmToken
	}
	return tools.ConfirmHuman
}

func execParameters(maxTimeout time.Duration) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
		`"command":{"description":"The program and its arguments: an array of strings, or one string split with shell quoting rules (no shell runs).",`+
		`"oneOf":[{"type":"array","items":{"type":"string","maxLength":65536},"minItems":1,"maxItems":1024},{"type":"string","minLength":1,"maxLength":65536}]},`+
		`"cwd":{"type":"string","description":"Working directory, relative to the workspace.","default":"."},`+
		`"timeout":{"type":"number","exclusiveMinimum":0,"maximum":%g,"description":"Seconds the command may run (at most %g); it is then stopped and the result says timed_out."},`+
		`"stdin":{"type":"string","description":"Text given to the command's standard input."}`+
		`},"required":["command"],"additionalProperties":false}`, maxTimeout.Seconds(), maxTimeout.Seconds()))
}

type execIn struct {
	Command json.RawMessage `json:"command"`
	Cwd     string          `json:"cwd"`
	Timeout float64         `json:"timeout"`
	Stdin   *string         `json:"stdin"`
}

func (t *execTool) Spec() tools.Spec { return t.spec }

// Execute checks the command against the allow-list and runs it.
func (t *execTool) Execute(ctx context.Context, call *tools.Call) (any, error) {
	var in execIn
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	words, err := commandWords(in.Command)
	if err != nil {
		return nil, err
	}
	prog, err := t.lookup(words[0])
	if err != nil {
		return nil, err
	}
	args, err := checkArgs(words[0], prog.rule, prog.opts, words[1:])
	if err != nil {
		return nil, err
	}
	if isGit(prog.path) {
		if args, err = t.set.guardedGit(prog.path, in.Cwd, args, prog.rule.Git); err != nil {
			return nil, err
		}
	}
	timeout := t.maxTimeout
	if in.Timeout > 0 && time.Duration(in.Timeout*float64(time.Second)) < timeout {
		timeout = time.Duration(in.Timeout * float64(time.Second))
	}
	spec := launch.RunSpec{Argv: append([]string{prog.path}, args...), Dir: in.Cwd, Stdin: in.Stdin, Timeout: timeout,
		Net: launch.RunNet{Tool: ExecuteCommandName}}
	res, err := run(ctx, t.r, call, spec)
	if err != nil {
		return nil, err
	}
	return res.outcome(prog.path)
}

// commandWords accepts the array form as it is and splits the string form.
func commandWords(raw json.RawMessage) ([]string, error) {
	var words []string
	if err := json.Unmarshal(raw, &words); err == nil {
		if len(words) == 0 || words[0] == "" {
			return nil, tools.Errorf(tools.ValidationError, "command is empty")
		}
		return words, nil
	}
	var line string
	if err := json.Unmarshal(raw, &line); err != nil {
		return nil, tools.Errorf(tools.ValidationError, "command must be an array of strings or a string")
	}
	return splitWords(line)
}

// lookup finds a program of the allow-list by its bare name; a path is
// accepted only when it is the allowed program's own path.
func (t *execTool) lookup(name string) (program, error) {
	if p, ok := t.programs[name]; ok {
		return p, nil
	}
	if p, ok := t.programs[filepath.Base(name)]; ok && p.path == name {
		return p, nil
	}
	names := make([]string, 0, len(t.programs))
	for n := range t.programs {
		names = append(names, n)
	}
	slices.Sort(names)
	return program{}, tools.NewPermissionError("program %q is not on the allow-list", name).WithCode(tools.CodeProgramNotAllowed).
		WithSuggestion("use one of: %s (by bare name)", strings.Join(names, ", "))
}

// checkArgs applies a program's rule and returns the arguments to run:
// the subcommand, then the allowed options as getopt_long parses them,
// rebuilt canonically (getopt.go), then "--" (when the program
// understands it) and the operands, so no operand and no option's value
// can act as an option.
func checkArgs(name string, rule ProgramRule, opts *optTable, args []string) ([]string, error) {
	var out []string
	if len(rule.Subcommands) > 0 {
		if len(args) == 0 || !slices.Contains(rule.Subcommands, args[0]) {
			first := ""
			if len(args) > 0 {
				first = args[0]
			}
			return nil, tools.NewPermissionError("%s %q is not allowed", name, first).WithCode(tools.CodeSubcommandNotAllowed).
				WithSuggestion("start the arguments with one of: %s", strings.Join(rule.Subcommands, ", "))
		}
		out, args = append(out, args[0]), args[1:]
	}
	if opts.any {
		// "*": the operator trusts callers with every option; the program
		// parses the words as given.
		return append(out, args...), nil
	}
	parsed, operands, err := opts.parse(name, args)
	if err != nil {
		if te, ok := tools.AsError(err); ok {
			te.Suggestion = opts.describe() + "; put operands that start with - after --"
		}
		return nil, err
	}
	for _, o := range parsed {
		out = append(out, o.words()...)
	}
	if rule.EndOfOptions {
		if len(operands) > 0 {
			out = append(out, "--")
		}
	} else {
		for _, o := range operands {
			if strings.HasPrefix(o, "-") && o != "-" {
				return nil, tools.NewSecurityError("operand %q would be read as an option by %s", o, name).
					WithCode(tools.CodeOptionInjection).WithSuggestion("write ./%s for a file of that name", o)
			}
		}
	}
	return append(out, operands...), nil
}
