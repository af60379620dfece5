package command

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/tools"
)

// TestNothingPlantedAnywhereRuns: issue 38, finding 2. A writable command
// made a repository with a submodule whose own configuration (and the
// legacy .git/modules/<name>/config) defined filter.<x>.clean; a git tool
// then ran git status, git stepped into the submodule and ran the filter.
// The driver guard read the top repository's configuration only.
//
// Here every kind of program a repository's configuration can name is
// planted in every place git may read one — a submodule's
// .git/modules/<name>/config, a legacy submodule's own .git directory, a
// repository added whole (a gitlink without .gitmodules), a submodule
// named only in the index's .gitmodules with ignore = none (git enters it
// whatever toold says), a file includeIf includes, a linked worktree's
// config.worktree, the top repository (file-transport uploadpack,
// core.gitProxy, an external diff, hooks) — and git
// tools run status, diff, log -p, add, fetch and commit, in every mode,
// with submodules off (the default) and on. Nothing planted runs, and
// the tools still answer.
func TestNothingPlantedAnywhereRuns(t *testing.T) {
	needGit(t)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			var marks string
			status := argvTool("git_status", "git", "status", "--porcelain=v1")
			statusSub := argvTool("git_status_sub", "git", "status", "--porcelain=v1")
			statusSub.Git.Submodules = true
			diffSub := argvTool("git_diff_sub", "git", "diff")
			diffSub.Git.Submodules = true
			logp := argvTool("git_log_p", "git", "log", "-p", "-2")
			diff := argvTool("git_diff", "git", "diff", "HEAD")
			add := argvTool("git_add", "git", "add", "-A")
			add.WorkspaceWritable = true
			fetch := argvTool("git_fetch", "git", "fetch", "-q", "origin")
			fetch.WorkspaceWritable = true
			fetchGit := argvTool("git_fetch_proxied", "git", "fetch", "-q", "proxied")
			fetchGit.WorkspaceWritable = true
			wtStatus := argvTool("git_status_worktree", "git", "status", "--porcelain=v1")
			wtStatus.Workdir = "wt"
			commit := argvTool("git_commit", "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
			commit.WorkspaceWritable = true
			cfg := Config{Tools: []ToolConfig{status, statusSub, diffSub, logp, diff, add, fetch, fetchGit, wtStatus, commit},
				ExecuteCommand: ExecConfig{Enabled: true, Programs: map[string]ProgramRule{"git": {
					Subcommands: []string{"status", "diff", "submodule"}, Options: []string{"--short", "--ignore-submodules[=VALUE]"}}}}}
			s, ws := newSet(t, mode, cfg, func(ws string, _ *Config) { marks = plantEverywhere(t, ws) })
			for _, c := range []struct {
				tool string
				args any
				out  string // what stdout must hold, when the call must succeed
			}{
				{"git_status", map[string]any{}, " M top.txt"},
				{"git_status_sub", map[string]any{}, " M top.txt"},
				{"git_diff_sub", map[string]any{}, "+two"},
				{"git_log_p", map[string]any{}, "+one"},
				{"git_diff", map[string]any{}, "+two"},
				{"git_status_worktree", map[string]any{}, " M top.txt"},
				{"git_fetch", map[string]any{}, ""},
				{"git_fetch_proxied", map[string]any{}, ""},
				{ExecuteCommandName, map[string]any{"command": []string{"git", "status", "--short"}}, " M top.txt"},
				{"git_add", map[string]any{}, ""},
				{"git_commit", map[string]any{}, ""},
			} {
				res, err := call(t, tool(t, s, c.tool), c.args, 60*time.Second)
				if err != nil {
					t.Fatalf("%s: %v", c.tool, err)
				}
				if strings.Contains(res.Stderr, "touch") { // sandboxed, the marks are out of reach: the attempt shows here
					t.Errorf("%s ran a planted program: %s", c.tool, res.Stderr)
				}
				if c.out != "" && (!res.OK || !strings.Contains(res.Stdout, c.out)) {
					t.Errorf("%s: ok %v, stdout %q does not hold %q; stderr %s", c.tool, res.OK, res.Stdout, c.out, res.Stderr)
				}
				if strings.HasPrefix(c.tool, "git_fetch") && !strings.Contains(res.Stderr, "not allowed") {
					t.Errorf("%s: the transport was not refused: %s", c.tool, res.Stderr)
				}
			}
			// Submodules off: what enters them is refused before git runs.
			for _, argv := range [][]string{{"git", "submodule", "update"}, {"git", "status", "--ignore-submodules=none"}} {
				_, err := call(t, tool(t, s, ExecuteCommandName), map[string]any{"command": argv}, 30*time.Second)
				if te, ok := tools.AsError(err); !ok || te.Kind != tools.PermissionError {
					t.Errorf("%q with submodules off: %v, want a permission error", argv, err)
				}
			}
			if ran, _ := os.ReadDir(marks); len(ran) > 0 {
				var names []string
				for _, e := range ran {
					names = append(names, e.Name())
				}
				t.Errorf("planted programs ran: %v (workspace %s)", names, ws)
			}
		})
	}
}

// plantEverywhere makes ws a repository in which every place git reads a
// configuration from defines programs, each touching a file in marks (a
// directory outside the workspace the run-as uid can write), as a
// writable command or a hostile archive would leave it:
//
//   - sub: a submodule (.git/modules/sub), its config defining a filter,
//     a diff driver, an fsmonitor and a hook, its .gitattributes naming
//     them, a file of it changed;
//   - legacy: a submodule with its own .git directory, the same;
//   - nested: a repository added whole (no .gitmodules entry), the same;
//   - hidden: a submodule named only in the index's .gitmodules (the file
//     deleted from the work tree) with ignore = none, the same;
//   - the top repository: an includeIf'd file defining the filter its
//     attributes name; a remote over the file transport whose uploadpack
//     is a program; a remote over git:// with core.gitProxy;
//     diff.external; hooks, in .git/hooks and in core.hooksPath;
//   - wt: a linked worktree whose config.worktree defines a filter.
func plantEverywhere(t *testing.T, ws string) string {
	t.Helper()
	marks, git := marksAndGit(t, ws)
	gitIn := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
		}
	}
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string) string { return "touch " + filepath.Join(marks, name) + "; cat" }
	// plant defines every kind of program in the repository at dir (its
	// git directory's config) and names them in its attributes.
	plant := func(dir, tag string) {
		for _, kv := range [][2]string{
			{"filter." + tag + ".clean", run(tag + "-clean")}, {"filter." + tag + ".process", run(tag + "-process")},
			{"diff." + tag + ".command", run(tag + "-diffcmd")}, {"diff." + tag + ".textconv", run(tag + "-textconv")},
			{"merge." + tag + ".driver", run(tag + "-merge")}, {"core.fsmonitor", run(tag + "-fsmonitor")},
			{"core.hooksPath", filepath.Join(ws, "hooks")},
		} {
			gitIn(dir, "config", kv[0], kv[1])
		}
	}
	upstream := filepath.Join(ws, "upstream")
	if err := os.MkdirAll(upstream, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(upstream, "init", "-q")
	gitIn(upstream, "commit", "-q", "--allow-empty", "-m", "up")
	for _, name := range []string{"subsrc", "legacy", "nested", "hiddensrc"} {
		dir := filepath.Join(ws, "src", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		gitIn(dir, "init", "-q")
		write("src/"+name+"/f.txt", "one\n")
		write("src/"+name+"/.gitattributes", "*.txt filter="+name+" diff="+name+" merge="+name+"\n")
		gitIn(dir, "add", ".")
		gitIn(dir, "commit", "-qm", "one")
	}
	git("init", "-q")
	write("top.txt", "one\n")
	git("add", "top.txt")
	git("commit", "-qm", "one")
	gitIn(ws, "submodule", "-q", "add", "./src/subsrc", "sub")
	gitIn(ws, "submodule", "-q", "add", "./src/hiddensrc", "hidden")
	gitIn(ws, "config", "-f", ".gitmodules", "submodule.hidden.ignore", "none")
	if err := exec.Command("cp", "-a", filepath.Join(ws, "src", "legacy"), filepath.Join(ws, "legacy")).Run(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("cp", "-a", filepath.Join(ws, "src", "nested"), filepath.Join(ws, "nested")).Run(); err != nil {
		t.Fatal(err)
	}
	write(".gitmodules", readFile(t, filepath.Join(ws, ".gitmodules"))+"[submodule \"legacy\"]\n\tpath = legacy\n\turl = ./src/legacy\n")
	git("add", ".gitmodules", "legacy", "nested")
	git("commit", "-qm", "submodules")
	plant(filepath.Join(ws, "sub"), "subsrc")
	plant(filepath.Join(ws, "legacy"), "legacy")
	plant(filepath.Join(ws, "nested"), "nested")
	plant(filepath.Join(ws, "hidden"), "hiddensrc")
	for _, d := range []string{"sub", "legacy", "nested", "hidden"} {
		write(d+"/f.txt", "two\n")
	}
	if err := os.Remove(filepath.Join(ws, ".gitmodules")); err != nil { // hidden is now named in the index only
		t.Fatal(err)
	}
	// The top repository.
	write(".git/info/attributes", "top.txt filter=inc diff=inc\n")
	write("inc.cfg", "[filter \"inc\"]\n\tclean = "+run("included-clean")+"\n[diff \"inc\"]\n\tcommand = "+run("included-diff")+"\n")
	git("config", "includeIf.gitdir:"+ws+"/.path", "../inc.cfg")
	git("config", "includeIf.onbranch:nothing.path", "../inc.cfg")
	git("config", "remote.origin.url", upstream)
	git("config", "remote.origin.uploadpack", "touch "+filepath.Join(marks, "uploadpack")+"; git-upload-pack")
	git("config", "remote.proxied.url", "git://127.0.0.1:1/x")
	write("proxy.sh", "#!/bin/sh\ntouch "+filepath.Join(marks, "gitproxy")+"\n")
	git("config", "core.gitProxy", filepath.Join(ws, "proxy.sh"))
	git("config", "diff.external", run("external"))

	// A linked worktree with a filter of its own.
	git("config", "extensions.worktreeConfig", "true")
	git("worktree", "add", "-q", "wt")
	gitIn(filepath.Join(ws, "wt"), "config", "--worktree", "filter.wtf.clean", run("worktree-clean"))
	write("wt/.gitattributes", "* filter=wtf\n")
	write("wt/top.txt", "three\n")
	write("top.txt", "two\n")
	// Hooks, last: the planting above runs git too.
	git("config", "core.hooksPath", filepath.Join(ws, "hooks"))
	for _, h := range []string{"hooks/pre-commit", ".git/hooks/pre-commit", "hooks/post-checkout", "hooks/fsmonitor-watchman"} {
		write(h, "#!/bin/sh\ntouch "+filepath.Join(marks, strings.ReplaceAll(h, "/", "-"))+"\n")
	}
	if err := exec.Command("chmod", "-R", "a+rwX", ws).Run(); err != nil {
		t.Fatal(err)
	}
	return marks
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSubmoduleOptionsRefused: with submodules off (the default) the
// options that make git enter submodules are refused, in any spelling
// git's option parser takes, before "--" only; the others pass.
func TestSubmoduleOptionsRefused(t *testing.T) {
	for arg, enters := range map[string]bool{
		"--recurse-submodules": true, "--recurse-submodules=on-demand": true, "--recurse-sub": true, "--recursive": true,
		"--ignore-submodules=none": true, "--ignore-submodules=dirty": true, "--ignore-submodules=all": false, "--ignore-submodules": false,
		"--submodule": true, "--submodule=diff": true, "--submodule=log": false, "--remote-submodules": true,
		"--no-recurse-submodules": false, "--reverse": false, "--grep=submodule": false, "-r": false, "--": false,
	} {
		if got := entersSubmodules(arg); got != enters {
			t.Errorf("entersSubmodules(%q) = %v", arg, got)
		}
	}
	for _, c := range []struct {
		args    []string
		refused bool
	}{
		{[]string{"submodule", "update"}, true},
		{[]string{"-C", "x", "submodule"}, true},
		{[]string{"fetch", "--recurse-submodules"}, true},
		{[]string{"log", "--", "--recurse-submodules"}, false},
		{[]string{"status"}, false},
	} {
		_, err := guardGit("/nonexistent", "/nonexistent", c.args, GitConfig{})
		if refused := err != nil; refused != c.refused {
			t.Errorf("%q: %v", c.args, err)
		}
		if _, err := guardGit("/nonexistent", "/nonexistent", c.args, GitConfig{Submodules: true}); err != nil {
			t.Errorf("%q with submodules on: %v", c.args, err)
		}
	}
	if g := gitGuards("/ws", GitConfig{Submodules: true}); slices.Contains(g, "diff.ignoreSubmodules=all") {
		t.Error("submodules on, and still ignored")
	}
}
