package command

import (
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// Config is the `commands:` section of toold's configuration. Zero values
// take the documented defaults, so an empty Config serves no tool at all
// (execute_command is off unless enabled).
type Config struct {
	// Config holds the section's settings of every program toold starts
	// (containment, run_as, rlimits, max_output_bytes, kill_grace, bwrap):
	// the launcher's, which the stdio MCP servers and consultation CLIs
	// share with the command tools.
	launch.Config `yaml:",inline"`
	// Tools are the declarative command tools.
	Tools []ToolConfig `yaml:"tools" validate:"dive"`
	// ExecuteCommand configures the general execute_command tool.
	ExecuteCommand ExecConfig `yaml:"execute_command"`
}

// Sandbox is a command tool's sandbox (launch.Sandbox, the one declaration
// of its keys) and the tool's limits.
type Sandbox struct {
	launch.Sandbox `yaml:",inline"`
	// Limits override the system_command category's limits (timeout 30s,
	// target 1s, max 2s, 10 in flight, 100 queued); zero fields inherit,
	// and max_queue: 0 means no queue.
	Limits tools.LimitsConfig `yaml:"limits"`
}

// ToolConfig declares one command tool.
type ToolConfig struct {
	// Name must match ^[a-zA-Z0-9_.-]{1,64}$ and be unique.
	Name        string `yaml:"name" validate:"required"`
	Description string `yaml:"description" validate:"required"`
	// Instructions tell the model when and why to use the tool.
	Instructions string `yaml:"instructions"`
	// Parameters is the JSON Schema of the arguments, written as YAML. A
	// top-level "default" of a property is applied before the argv is
	// rendered. Default: no parameters.
	Parameters map[string]any `yaml:"parameters"`
	// Argv is the command line: the first element is the program (literal
	// text, absolute or found on the tool's PATH); see Arg for the forms.
	Argv []Arg `yaml:"argv" validate:"min=1"`
	// Workdir is the working directory, relative to the workspace
	// (default: the workspace itself).
	Workdir string `yaml:"workdir"`
	// Stdin names a string parameter fed to the command's standard input
	// (default: /dev/null).
	Stdin string `yaml:"stdin"`
	// SuccessCodes are the exit codes that mean success (default [0]).
	SuccessCodes []int `yaml:"success_codes" validate:"dive,gte=0,lte=255"`
	// Output says how stdout is parsed into "parsed": text (default, not
	// parsed), json (one JSON value) or lines (an array of lines).
	Output string `yaml:"output" validate:"omitempty,oneof=text json lines"`
	// RequiresConfirmation makes every call wait for the caller's
	// confirmation.
	RequiresConfirmation bool `yaml:"requires_confirmation"`
	// ReadOnly declares that the command changes nothing (git status,
	// git log): MCP hosts see readOnlyHint, and an interrupted async call
	// of it may be run again. Default false: a command may change things.
	ReadOnly bool `yaml:"read_only"`
	// Idempotent declares that running the command twice with the same
	// arguments has no additional effect (implied by read_only).
	Idempotent bool `yaml:"idempotent"`
	// Executes lists the workspace files the command runs, or reads as
	// configuration that names programs (Makefile, package.json, .npmrc,
	// .envrc, ...): doublestar globs relative to the workspace, a glob
	// without "/" matching at any depth, case ignored. write_file and
	// edit_file refuse to change them (a model could otherwise turn this
	// tool into any command it likes); .git is always protected.
	Executes []string `yaml:"executes" validate:"dive,required"`
	// Examples are argument objects shown to models; each must validate.
	Examples []tools.ExampleConfig `yaml:"examples" validate:"dive"`
	// MaxResultBytes is the tool's result budget (absent: the server's,
	// server.max_result_bytes; 0: none): a larger result is answered
	// with a head that fits and kept whole as an artifact of the call.
	MaxResultBytes *int64 `yaml:"max_result_bytes" validate:"omitempty,result_budget"`
	// Git is what the tool may do when its program is git beyond the
	// guards every git run gets (git.go): `git: {submodules: true}` lets
	// it enter submodules.
	Git     GitConfig `yaml:"git"`
	Sandbox `yaml:"sandbox"`
}

// ExecConfig configures execute_command, the general tool that runs a
// program of an allow-list with arguments the model chooses.
type ExecConfig struct {
	// Enabled serves execute_command; it is off by default and always
	// requires confirmation.
	Enabled bool `yaml:"enabled"`
	// Confirmation is how each call is confirmed: human (the default: it
	// waits for an approver) or token (the host asks its user and repeats
	// the call with a token). It cannot be none.
	Confirmation string `yaml:"confirmation" validate:"omitempty,oneof=token human"`
	// MaxTimeout caps the call's "timeout" argument (default 30s).
	MaxTimeout time.Duration `yaml:"max_timeout" validate:"gte=0"`
	// Path lists the directories programs are looked up in (default
	// /usr/local/bin, /usr/bin, /bin); it is also the command's PATH.
	Path []string `yaml:"path" validate:"dive,required"`
	// Programs is the allow-list, by the name a caller uses.
	Programs map[string]ProgramRule `yaml:"programs" validate:"dive"`
	Sandbox  `yaml:"sandbox"`
}

// ProgramRule is what execute_command allows for one program.
type ProgramRule struct {
	// Path is the program's absolute path (default: looked up in Path).
	Path string `yaml:"path"`
	// Subcommands, when set, are the only words allowed as the first
	// argument (for git, go, ...); options before it are refused.
	Subcommands []string `yaml:"subcommands" validate:"dive,required"`
	// Options are the options a caller may pass, each saying whether it
	// takes a value: "-v" and "--verbose" take none; "-e VALUE" and
	// "--regexp=VALUE" (or the older "--regexp=") take one, attached
	// (-eX, --regexp=X) or as the next word, which is then never read as
	// an option; "-c[VALUE]" and "--color[=VALUE]" take an optional,
	// attached value; {a,b} instead of VALUE allows only those values
	// (--color={never,auto}). Single-dash long options (find, Go's flag
	// package) are written "-name VALUE", "-count=N" or "-v[=BOOL]" and
	// matched whole. The arguments are parsed with GNU getopt_long's rules
	// (clusters like -ie X, abbreviations of long options, options after
	// operands, "--") and passed on canonically.
	// "*" allows every option unparsed. Anything else starting with "-"
	// is refused.
	Options []string `yaml:"options" validate:"dive,required"`
	// EndOfOptions says the program understands "--": toold then puts the
	// allowed options first and "--" before the operands, so an operand
	// can never be read as an option. Without it an operand starting with
	// "-" is refused.
	EndOfOptions bool `yaml:"end_of_options"`
	// Git is, for git, what ToolConfig's Git is for a declared tool.
	Git GitConfig `yaml:"git"`
}
