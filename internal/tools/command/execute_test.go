package command

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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
				{"cwd", map[string]any{"command": []string{"sh", "-c", "pwd"}, "cwd": "sub"}, filepath.Join(s.host.workspace, "sub") + "\n", ""},
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
		"bad containment":  {Enabled: true, Programs: map[string]ProgramRule{"ls": {}}, Sandbox: Sandbox{Containment: "chroot"}},
	} {
		if s, err := New(Config{ExecuteCommand: cfg, Containment: "none"}, ws, nil); err == nil {
			_ = s.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}
