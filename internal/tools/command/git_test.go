package command

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/testpeer"
)

// plantedRepo makes ws a git repository whose .git/config, as a hostile
// archive or an earlier unconfined write would leave it, runs a command
// from every hook git offers for a read: fsmonitor (git status), a pager,
// an external diff and a textconv driver. Each touches a file in marks,
// a directory the run-as uid can write outside the workspace.
func plantedRepo(t *testing.T, ws string) string {
	t.Helper()
	marks, git := marksAndGit(t, ws)
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".gitattributes"), []byte("*.txt diff=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-qm", "one")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string) string { return "touch " + filepath.Join(marks, name) + "; true" }
	for _, kv := range [][2]string{{"core.fsmonitor", run("fsmonitor")}, {"core.pager", run("pager")},
		{"diff.external", run("external")}, {"diff.evil.textconv", run("textconv")}, {"alias.st", "!" + run("alias")}} {
		git("config", kv[0], kv[1])
	}
	if err := exec.Command("chmod", "-R", "a+rwX", ws).Run(); err != nil {
		t.Fatal(err)
	}
	return marks
}

// marksAndGit is a directory the run-as uid can write outside the
// workspace (where a planted program leaves its mark), and git run on
// the host in ws, as the repository's planter.
func marksAndGit(t *testing.T, ws string) (string, func(args ...string)) {
	t.Helper()
	marks := t.TempDir()
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	return marks, func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestGitToolsIgnoreRepositoryPrograms: a git command tool never runs a
// program the repository's configuration names, in every containment mode,
// whether declared (git status, log -p, diff, the example's git_status
// with safe.directory "*") or reached through execute_command; and the
// tools still work.
func TestGitToolsIgnoreRepositoryPrograms(t *testing.T) {
	testpeer.Git(t)
	// The example's git_status before the fix: safe.directory "*" in its env.
	exampleEnv := map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
		"GIT_OPTIONAL_LOCKS": "0"}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			var marks string
			status := argvTool("git_status", "git", "status", "--porcelain=v1", "--branch")
			status.Env = exampleEnv
			plain := argvTool("git_status_plain", "git", "status", "--porcelain=v1")
			logp := argvTool("git_log_p", "git", "log", "-p", "-1")
			logp.Env = exampleEnv
			diff := argvTool("git_diff", "git", "diff")
			diff.Env = exampleEnv
			cfg := Config{Tools: []ToolConfig{status, plain, logp, diff},
				ExecuteCommand: ExecConfig{Enabled: true, Programs: map[string]ProgramRule{"git": {Subcommands: []string{"status", "diff", "st"}, Options: []string{"--short"}}},
					Sandbox: Sandbox{Sandbox: launch.Sandbox{Env: exampleEnv}}}}
			s, _ := newSet(t, mode, cfg, func(ws string, _ *Config) { marks = plantedRepo(t, ws) })
			calls := []struct {
				tool string
				args any
				out  string // what stdout must hold
			}{
				{"git_status", map[string]any{}, " M a.txt"},
				{"git_status_plain", map[string]any{}, " M a.txt"},
				{"git_log_p", map[string]any{}, "+one"},
				{"git_diff", map[string]any{}, "+two"},
				{ExecuteCommandName, map[string]any{"command": []string{"git", "status", "--short"}}, " M a.txt"},
				{ExecuteCommandName, map[string]any{"command": []string{"git", "diff"}}, "+two"},
			}
			for _, c := range calls {
				res, err := call(t, tool(t, s, c.tool), c.args, 30*time.Second)
				if err != nil {
					t.Fatalf("%s: %v", c.tool, err)
				}
				if strings.Contains(res.Stderr, "touch") { // bwrap hides marks: the attempt shows here
					t.Errorf("%s ran a repository's program: %s", c.tool, res.Stderr)
				}
				if !res.OK || !strings.Contains(res.Stdout, c.out) {
					t.Errorf("%s: ok %v, stdout %q does not hold %q; stderr %s", c.tool, res.OK, res.Stdout, c.out, res.Stderr)
				}
			}
			// An alias is refused as a subcommand by the allow-list; run it
			// to show that, even so, it would not matter here.
			if _, err := call(t, tool(t, s, ExecuteCommandName), map[string]any{"command": []string{"git", "st"}}, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if ran, _ := os.ReadDir(marks); len(ran) > 0 {
				var names []string
				for _, e := range ran {
					names = append(names, e.Name())
				}
				t.Errorf("the repository's programs ran: %v", names)
			}
		})
	}
}

// TestGuardGit: the guards go right before git's subcommand, past its
// global options, so a caller's -c cannot override them; the subcommand
// cannot be a repository's alias; and the driver guards follow the
// subcommands that run drivers by default.
func TestGuardGit(t *testing.T) {
	g := gitGuards("/ws", GitConfig{})
	cases := []struct {
		in      []string
		globals int    // how many words come before the guards
		alias   string // the subcommand whose alias is emptied
		rest    []string
	}{
		{[]string{"status"}, 0, "status", []string{"status"}},
		{[]string{"log", "-p"}, 0, "log", []string{"log", "--no-ext-diff", "--no-textconv", "-p"}},
		{[]string{"-C", "diff", "diff"}, 2, "diff", []string{"diff", "--no-ext-diff", "--no-textconv"}},
		{[]string{"--no-pager", "-c", "core.fsmonitor=evil", "blame", "f"}, 3, "blame", []string{"blame", "--no-textconv", "f"}},
		{[]string{"--git-dir", "log", "status"}, 2, "status", []string{"status"}},
		{[]string{"x=y"}, 0, "", []string{"x=y"}},
		{[]string{"--version"}, 0, "", []string{"--version"}},
		{nil, 0, "", nil},
	}
	for _, c := range cases {
		want := append(slices.Clone(c.in[:c.globals]), g...)
		if c.alias != "" {
			want = append(want, "-c", "alias."+c.alias+"=")
		}
		want = append(want, c.rest...)
		if got, err := guardGit("/ws", "/ws", c.in, GitConfig{}); err != nil || !slices.Equal(got, want) {
			t.Errorf("guardGit(%q) =\n%q\nwant\n%q", c.in, got, want)
		}
	}
}
