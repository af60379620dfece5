package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

var gitRule = ProgramRule{Subcommands: []string{"log", "status"}, Options: []string{"--oneline", "--max-count="}, EndOfOptions: true}

func TestCheckArgs(t *testing.T) {
	cases := []argCase{
		{"options first, -- before operands", gitRule, []string{"log", "README", "--oneline", "--max-count=3"}, []string{"log", "--oneline", "--max-count=3", "--", "README"}, ""},
		{"no operands, no --", gitRule, []string{"status"}, []string{"status"}, ""},
		{"caller's -- keeps dashes literal", gitRule, []string{"log", "--", "--output=/tmp/x"}, []string{"log", "--", "--output=/tmp/x"}, ""},
		{"option not allowed", gitRule, []string{"log", "--output=/tmp/x"}, nil, tools.PermissionError},
		{"global option before subcommand", gitRule, []string{"-c", "core.sshCommand=touch /tmp/p", "status"}, nil, tools.PermissionError},
		{"subcommand not allowed", gitRule, []string{"push"}, nil, tools.PermissionError},
		{"missing subcommand", gitRule, nil, nil, tools.PermissionError},
		{"plain program", ProgramRule{}, []string{"a", "-"}, []string{"a", "-"}, ""},
		{"dash operand without -- support", ProgramRule{}, []string{"-rf"}, nil, tools.PermissionError},
		{"dash operand after caller's --", ProgramRule{}, []string{"--", "-rf"}, nil, tools.SecurityError},
		{"wildcard options", ProgramRule{Options: []string{"*"}}, []string{"-x", "y"}, []string{"-x", "y"}, ""},
	}
	runArgCases(t, cases)
}

func TestExecuteCommand(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "x")
			cfg := Config{ExecuteCommand: ExecConfig{Enabled: true, MaxTimeout: 2 * time.Second, Programs: map[string]ProgramRule{
				"git": gitRule, "echo": {}, "sleep": {}, "sh": {Options: []string{"-c"}}}}}
			s, ws := newSet(t, m, cfg)
			if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/", filepath.Join(ws, "escape")); err != nil {
				t.Fatal(err)
			}
			ex := tool(t, s, ExecuteCommandName)
			if !ex.Spec().Confirmation.Required() {
				t.Error("execute_command must require confirmation")
			}
			cases := []struct {
				name   string
				args   map[string]any
				stdout string
				kind   tools.Kind
			}{
				{"array", map[string]any{"command": []string{"echo", "a b", "; id"}}, "a b ; id\n", ""},
				{"string", map[string]any{"command": `echo 'a b' "c"`}, "a b c\n", ""},
				{"cwd", map[string]any{"command": []string{"sh", "-c", "pwd"}, "cwd": "sub"}, filepath.Join(s.l.Workspace(), "sub") + "\n", ""},
				{"stdin", map[string]any{"command": []string{"sh", "-c", "cat"}, "stdin": "hello"}, "hello", ""},
				{"not allowed", map[string]any{"command": []string{"id"}}, "", tools.PermissionError},
				{"path of another program", map[string]any{"command": []string{"/usr/bin/id"}}, "", tools.PermissionError},
				{"shell syntax", map[string]any{"command": "echo a; id"}, "", tools.UserError},
				{"cwd escape", map[string]any{"command": []string{"echo"}, "cwd": "../.."}, "", tools.SecurityError},
				{"cwd symlink escape", map[string]any{"command": []string{"echo"}, "cwd": "escape"}, "", tools.SecurityError},
				{"flag injection refused", map[string]any{"command": []string{"git", "log", "--output=" + outside}}, "", tools.PermissionError},
				{"git -c refused", map[string]any{"command": []string{"git", "-c", "core.sshCommand=touch " + outside, "status"}}, "", tools.PermissionError},
			}
			for _, c := range cases {
				r, err := call(t, ex, c.args, 10*time.Second)
				te, _ := tools.AsError(err)
				switch {
				case c.kind != "" && (te == nil || te.Kind != c.kind):
					t.Errorf("%s: err = %v, want kind %s", c.name, err, c.kind)
				case c.kind == "" && err != nil:
					t.Errorf("%s: %v", c.name, err)
				case c.kind == "" && r.Stdout != c.stdout:
					t.Errorf("%s: stdout %q, want %q (%+v)", c.name, r.Stdout, c.stdout, r)
				}
			}
			// A caller's "--" neutralises an option-looking operand: git
			// reads it as a path, and writes nothing.
			if _, err := call(t, ex, map[string]any{"command": []string{"git", "log", "--", "--output=" + outside}}, 10*time.Second); err != nil {
				t.Error(err)
			}
			if _, err := os.Stat(outside); err == nil {
				t.Error("git wrote the file named by an injected option")
			}
			start := time.Now()
			r, err := call(t, ex, map[string]any{"command": []string{"sleep", "10"}, "timeout": 0.3}, 10*time.Second)
			if err != nil || !r.TimedOut || r.OK || time.Since(start) > 2*time.Second {
				t.Errorf("own timeout: %+v %v after %v", r, err, time.Since(start))
			}
		})
	}
}

func TestExecuteCommandConfig(t *testing.T) {
	ws := t.TempDir()
	for name, cfg := range map[string]ExecConfig{
		"empty allow-list": {Enabled: true},
		"missing program":  {Enabled: true, Programs: map[string]ProgramRule{"no-such-program-x": {}}},
		"path in the name": {Enabled: true, Programs: map[string]ProgramRule{"/bin/ls": {}}},
		"bad containment":  {Enabled: true, Programs: map[string]ProgramRule{"ls": {}}, Sandbox: Sandbox{Sandbox: launch.Sandbox{Containment: "chroot"}}},
	} {
		if _, err := build(t, Config{ExecuteCommand: cfg, Config: launch.Config{Containment: "none"}}, ws); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFailingCommands: a command that fails is a user_error with a code
// for how it failed and the last lines of its output in the message, and
// carries its Result (the envelope's data); an exit code the tool
// declares a success code is a success.
func TestFailingCommands(t *testing.T) {
	sh := func(name, script string) ToolConfig { return argvTool(name, "sh", "-c", script) }
	ok1 := sh("ok1", "echo fine; exit 1")
	ok1.SuccessCodes = []int{0, 1}
	long := sh("long", "yes line")
	long.MaxOutputBytes = 4096
	cfg := Config{Tools: []ToolConfig{
		sh("exit3", "echo out; for i in 1 2 3 4 5 6 7; do echo err$i >&2; done; exit 3"),
		sh("quiet", "echo only stdout; exit 2"),
		sh("killed", "kill -9 $$"),
		ok1, long,
	}, ExecuteCommand: ExecConfig{Enabled: true, MaxTimeout: 5 * time.Second, Programs: map[string]ProgramRule{"sleep": {}}}}
	s, _ := newSet(t, launch.ModeNone, cfg)
	cases := []struct {
		tool     string
		args     map[string]any
		code     string // "" for a success
		message  string
		exitCode int
	}{
		{"exit3", nil, "exit_status", "sh exited with code 3; its output ends:\nerr3\nerr4\nerr5\nerr6\nerr7", 3},
		{"quiet", nil, "exit_status", "sh exited with code 2; its output ends:\nonly stdout", 2},
		{"killed", nil, "killed", "sh was killed by SIGKILL", -1},
		{"long", nil, "output_truncated", "sh wrote more than its output cap to stdout and was stopped; its output ends:", -1},
		{ExecuteCommandName, map[string]any{"command": []string{"sleep", "10"}, "timeout": 0.2}, "timed_out", "sleep outlived its timeout and was stopped", -1},
		{"ok1", nil, "", "", 1},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			args := c.args
			if args == nil {
				args = map[string]any{}
			}
			out, err := answer(t, tool(t, s, c.tool), args, 10*time.Second)
			if c.code == "" {
				if r, _ := out.(*Result); err != nil || r == nil || !r.OK || r.ExitCode != c.exitCode {
					t.Fatalf("got %+v, %v; want a success with exit code %d", out, err, c.exitCode)
				}
				return
			}
			te, ok := tools.AsError(err)
			if !ok || te.Kind != tools.UserError || string(te.Code) != c.code {
				t.Fatalf("got %v, want a user_error with code %s", err, c.code)
			}
			if !strings.HasPrefix(te.Message, c.message) {
				t.Errorf("message %q, want it to start with %q", te.Message, c.message)
			}
			if te.Suggestion == "" {
				t.Error("no suggestion")
			}
			r, _ := te.Result.(*Result)
			if r == nil || r.OK || (c.exitCode >= 0 && r.ExitCode != c.exitCode) {
				t.Errorf("result %+v, want a failed one with exit code %d", r, c.exitCode)
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	cases := []struct {
		in   string
		n, m int
		want string
	}{
		{"", 5, 512, ""},
		{"a\nb\nc\n", 2, 512, "b\nc"},
		{"a\nb\n", 5, 512, "a\nb"},
		{"0123456789\nab\n", 5, 5, "ab"},
		{"xxé", 5, 2, "é"},
		{"xxxxé", 5, 1, ""},
	}
	for _, c := range cases {
		if got := lastLines(c.in, c.n, c.m); got != c.want {
			t.Errorf("lastLines(%q, %d, %d) = %q, want %q", c.in, c.n, c.m, got, c.want)
		}
	}
}
