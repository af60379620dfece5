package command

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toold/toold/internal/tools"
)

// modes are the containment modes the adversarial tests run under.
var modes = []Mode{ModeNone, ModeNamespaces, ModeBwrap}

// newSet builds a Set in the given mode over a fresh workspace, skipping
// the test with the reason when this machine cannot provide the mode.
// prep, when given, may adjust cfg once the workspace exists.
func newSet(t testing.TB, mode Mode, cfg Config, prep ...func(ws string, cfg *Config)) (*Set, string) {
	t.Helper()
	ws := t.TempDir()
	// The run-as uid must reach the workspace (t.TempDir is 0700).
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range prep {
		p(ws, &cfg)
	}
	cfg.Containment = string(mode)
	s, err := New(cfg, ws, zaptest.NewLogger(t))
	if err != nil {
		if unavailable(err) {
			t.Skipf("containment %s is not available on this machine: %v", mode, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, ws
}

// unavailable tells a machine that lacks a mode from a broken config.
func unavailable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "does not work here") || strings.Contains(msg, "need root") ||
		strings.Contains(msg, "not installed") || strings.Contains(msg, "unsharing")
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

// procsWith lists the pids whose environment or command line holds marker.
func procsWith(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + e.Name() + "/" + f)
			if err == nil && strings.Contains(string(b), marker) {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// procsOfUID lists the processes (zombies included) whose real uid is uid.
func procsOfUID(uid int) []string {
	var pids []string
	want := fmt.Sprintf("Uid:\t%d\t", uid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err == nil && strings.Contains(string(b), want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
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
