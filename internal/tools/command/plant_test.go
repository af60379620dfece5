package command

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/testpeer"
	"github.com/toold/toold/internal/tools"
)

// TestNoRunPlantsCodeForGit: issue 24, finding 3. A command tool with a
// writable workspace wrote .git/config (filter.<x>.clean) and
// .git/info/attributes, and a git tool then ran the filter. Now, in
// namespaces and bwrap, a writable run cannot change .git (bound
// read-only) while it still writes the rest of the workspace, and a git
// tool still may (git add); and a
// repository planted whole, whose filter drivers (one defined in an
// included file) and merge driver are the repository's to name, still
// makes no git tool run them, in every mode.
func TestNoRunPlantsCodeForGit(t *testing.T) {
	testpeer.Git(t)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			var marks string
			writer := argvTool("writer", "sh", "-c", `printf '[filter "w"]\n\tclean = touch x\n' >> .git/config; `+
				`echo '* filter=w' >> .git/info/attributes; mv .git .gone; echo ok > other.txt`)
			writer.WorkspaceWritable = true
			status := argvTool("git_status", "git", "status", "--porcelain=v1")
			adder := argvTool("git_add", "git", "add", "-A")
			adder.WorkspaceWritable = true
			cfg := Config{Tools: []ToolConfig{writer, status, adder},
				ExecuteCommand: ExecConfig{Enabled: true, Programs: map[string]ProgramRule{"git": {Subcommands: []string{"status", "diff", "add"}, Options: []string{"--short", "-A"}}}}}
			s, ws := newSet(t, mode, cfg, func(ws string, _ *Config) { marks = plantedFilters(t, ws) })
			before, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))

			res, err := call(t, tool(t, s, "writer"), map[string]any{}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
			if mode != launch.ModeNone {
				if string(after) != string(before) {
					t.Errorf("a writable run changed .git/config: %s", after)
				}
				if _, err := os.Stat(filepath.Join(ws, ".git", "HEAD")); err != nil {
					t.Errorf("a writable run moved .git away: %v", err)
				}
				if b, _ := os.ReadFile(filepath.Join(ws, "other.txt")); string(b) != "ok\n" || !strings.Contains(res.Stderr, "Read-only") {
					t.Errorf("the rest of the workspace: %q; stderr %s", b, res.Stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(ws, ".gone")); err == nil {
				// none guards .git by file permissions only; elsewhere an
				// error is reported above. The planted repository goes on.
				if err := os.Rename(filepath.Join(ws, ".gone"), filepath.Join(ws, ".git")); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				tool string
				args any
			}{
				{"git_status", map[string]any{}},
				{ExecuteCommandName, map[string]any{"command": []string{"git", "status", "--short"}}},
				{"git_add", map[string]any{}},
			} {
				res, err := call(t, tool(t, s, c.tool), c.args, 30*time.Second)
				if err != nil {
					t.Fatalf("%s: %v", c.tool, err)
				}
				if strings.Contains(res.Stderr, "touch") { // sandboxed, the marks are out of reach: the attempt shows here
					t.Errorf("%s ran a repository's driver: %s", c.tool, res.Stderr)
				}
				if !res.OK {
					t.Errorf("%s %v: stdout %q stderr %q", c.tool, c.args, res.Stdout, res.Stderr)
				}
			}
			if ran, _ := os.ReadDir(marks); len(ran) > 0 {
				var names []string
				for _, e := range ran {
					names = append(names, e.Name())
				}
				t.Errorf("the repository's drivers ran: %v", names)
			}
		})
	}
}

// plantedFilters makes ws a repository whose configuration defines clean
// filters (one in a file .git/config includes) named by
// .git/info/attributes, with a file of each changed since the commit, as
// a hostile archive unpacked into the workspace would leave it. Each
// filter touches a file in marks before passing the content on.
func plantedFilters(t *testing.T, ws string) string {
	t.Helper()
	marks, git := marksAndGit(t, ws)
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("a.txt", "one\n")
	write("b.md", "one\n")
	git("add", ".")
	git("commit", "-qm", "one")
	write("a.txt", "two\n")
	write("b.md", "two\n")
	write("new.txt", "new\n")
	run := func(name string) string { return "touch " + filepath.Join(marks, name) + "; cat" }
	git("config", "filter.evil.clean", run("clean"))
	git("config", "filter.evil.process", run("process"))
	git("config", "merge.evil.driver", run("merge"))
	git("config", "include.path", "../inc.cfg") // relative to .git/config
	write("inc.cfg", "[filter \"Inc\"]\n\tclean = "+run("included")+"\n\trequired = true\n")
	write(".git/info/attributes", "*.txt filter=evil merge=evil\n*.md filter=Inc\n")
	if err := exec.Command("chmod", "-R", "a+rwX", ws).Run(); err != nil {
		t.Fatal(err)
	}
	return marks
}

// TestGitGuardReadsNothingOutside: the guard reads the repository's
// config of the run's directory, and a directory that leads outside the
// workspace (here a symlink to a repository elsewhere) is refused as
// outside before the guard reads anything there — not refused for a
// driver name found in a config toold had no business reading.
func TestGitGuardReadsNothingOutside(t *testing.T) {
	testpeer.Git(t)
	outside := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", outside).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	f, err := os.OpenFile(filepath.Join(outside, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("[filter \"a=b\"]\n\tclean = cat\n") // a name -c cannot carry: the guard would refuse it
	_ = f.Close()
	cfg := Config{ExecuteCommand: ExecConfig{Enabled: true, Programs: map[string]ProgramRule{"git": {Subcommands: []string{"status"}}}}}
	s, _ := newSet(t, launch.ModeNone, cfg, func(ws string, _ *Config) {
		if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
			t.Fatal(err)
		}
	})
	_, err = call(t, tool(t, s, ExecuteCommandName), map[string]any{"command": []string{"git", "status"}, "cwd": "out"}, 30*time.Second)
	if te, ok := tools.AsError(err); !ok || te.Code != tools.CodeOutsideWorkspace {
		t.Fatalf("git in a directory outside the workspace: %v, want %s", err, tools.CodeOutsideWorkspace)
	}
}
