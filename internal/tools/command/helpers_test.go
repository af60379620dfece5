package command

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/launchtest"
	"github.com/toold/toold/internal/tools"
)

// modes are the containment modes the tests of every mode run under.
var modes = []launch.Mode{launch.ModeNone, launch.ModeNamespaces, launch.ModeBwrap}

// newSet builds a Set in the given mode over a fresh workspace, skipping
// the test with the reason when this machine cannot provide the mode.
// prep, when given, may adjust cfg once the workspace exists.
func newSet(t testing.TB, mode launch.Mode, cfg Config, prep ...func(ws string, cfg *Config)) (*Set, string) {
	t.Helper()
	ws := launchtest.Workspace(t)
	for _, p := range prep {
		p(ws, &cfg)
	}
	cfg.Containment = string(mode)
	s, err := build(t, cfg, ws)
	if err != nil {
		if errors.Is(err, launch.ErrUnavailable) {
			launchtest.Unavailable(t, "containment %s is not available on this machine: %v", mode, err)
		}
		t.Fatal(err)
	}
	return s, ws
}

// build builds cfg's tools over ws, on a launcher of their own that the
// test closes.
func build(t testing.TB, cfg Config, ws string) (*Set, error) {
	t.Helper()
	l, err := launch.New(cfg.Config, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return New(cfg, l, zaptest.NewLogger(t))
}

// tool returns the Set's tool of that name.
func tool(t testing.TB, s *Set, name string) tools.Tool {
	t.Helper()
	for _, tl := range s.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

// call executes a tool with JSON arguments under a timeout. A command
// that ran and failed is the Result its user_error carries (what the
// envelope shows as data), checked to be a failure; TestFailingCommands
// checks the error itself.
func call(t testing.TB, tl tools.Tool, args any, timeout time.Duration) (*Result, error) {
	t.Helper()
	out, err := answer(t, tl, args, timeout)
	if te, ok := tools.AsError(err); ok && te.Result != nil {
		r := te.Result.(*Result)
		if te.Kind != tools.UserError || r.OK {
			t.Fatalf("a failed run is a %s with ok=%v", te.Kind, r.OK)
		}
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	return out.(*Result), nil
}

// answer is the tool's own answer to JSON arguments under a timeout.
func answer(t testing.TB, tl tools.Tool, args any, timeout time.Duration) (any, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return tl.Execute(ctx, tools.NewCall(raw, "test", "test", nil))
}

// argvTool is a tool config running a fixed argv with no parameters.
func argvTool(name string, argv ...string) ToolConfig {
	tc := ToolConfig{Name: name, Description: "test tool " + name}
	for _, a := range argv {
		tc.Argv = append(tc.Argv, Arg{Arg: a})
	}
	return tc
}

// checkOutcome wants an error of the given kind, or (kind "") no error and
// got equal to want.
func checkOutcome[T any](t *testing.T, got T, err error, want T, kind tools.Kind) {
	t.Helper()
	if te, _ := tools.AsError(err); kind != "" && (te == nil || te.Kind != kind) {
		t.Fatalf("err = %v, want kind %s", err, kind)
	}
	if kind == "" && err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// argCase is one argument list checked against a program's rule: the
// arguments toold passes on, or the kind of the refusal.
type argCase struct {
	name string
	rule ProgramRule
	args []string
	want []string
	kind tools.Kind
}

// runArgCases checks each case's arguments with its rule's compiled
// options.
func runArgCases(t *testing.T, cases []argCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts, err := compileOptions(c.rule.Options)
			if err != nil {
				t.Fatal(err)
			}
			got, err := checkArgs("prog", c.rule, opts, c.args)
			checkOutcome(t, got, err, c.want, c.kind)
		})
	}
}
