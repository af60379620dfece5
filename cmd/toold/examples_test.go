package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/examples/standins/fakeapi"
	"github.com/toold/toold/internal/testpeer"
)

// TestExampleCommandsRunOffline: examples/commands.yaml's git and go tools
// on a repository of their own. Its go_test builds the standard library in
// the sandbox's empty cache (about a minute on 2 cores), so it runs beside
// the other parallel tests rather than before them.
func TestExampleCommandsRunOffline(t *testing.T) {
	t.Parallel()
	testpeer.Git(t)
	ws := exampleRepo(t)
	in := start(t, nil, "-config", "../../examples/commands.yaml", "-workspace", ws)
	calls := []struct{ tool, args, want string }{
		{"git_status", `{}`, "## "},
		{"git_log", `{"max_count": 5}`, "first commit"},
	}
	if !testing.Short() { // go test builds the standard library afresh: minutes on a small machine
		calls = append(calls, struct{ tool, args, want string }{"go_test", `{"packages": ["./..."]}`, "ok  \texample.com/demo"})
	}
	in.client.Timeout = 5 * time.Minute // go_test's own timeout, and more
	for _, c := range calls {
		status, env := in.exec(c.tool, c.args)
		data, _ := env["data"].(map[string]any)
		if status != 200 || env["status"] != "success" || data["ok"] != true || !strings.Contains(fmt.Sprint(data["stdout"]), c.want) {
			t.Errorf("%s %s: %d %v", c.tool, c.args, status, env)
		}
	}
	// A command that fails is never a success: the call fails as a
	// user_error, and its data still holds what the command said.
	status, env := in.exec("go_test", `{"packages": ["./missing"]}`)
	data, _ := env["data"].(map[string]any)
	e, _ := env["error"].(map[string]any)
	if status != 200 || env["status"] != "error" || e["type"] != "user_error" || e["code"] != "exit_status" ||
		data["ok"] != false || !strings.Contains(fmt.Sprint(data["stderr"]), "missing") {
		t.Errorf("go_test of a missing package: %d %v", status, env)
	}
}

// TestExamplesRunOffline starts example configurations as their headers
// say and makes the calls they document, with nothing from the internet:
// the workspace is a fresh local repository, the HTTP APIs are the shipped
// stand-in (examples/standins), and an MCP server is one of the pinned
// reference servers (make deps). A call's envelope must say
// success and its result must say the command worked.
func TestExamplesRunOffline(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		// The example's offline stand-in, configured as its header says.
		api := httptest.NewServer(fakeapi.Handler())
		t.Cleanup(api.Close)
		env := map[string]string{"TOOLD_EXAMPLE_API": api.URL, "TOOLD_EXAMPLE_ALLOW": "127.0.0.1", "TOOLD_EXAMPLE_ALLOW_HTTP": "true"}
		in := start(t, env, "-config", "../../examples/http.yaml", "-workspace", t.TempDir())
		for _, c := range []struct{ tool, args, want string }{
			{"github_issue_search", `{"query": "repo:golang/go is:issue is:open label:NeedsFix http2", "per_page": 2}`, "repository:example/repo"},
			{"weather_current", `{"city": "Oslo,NO"}`, "city:Oslo"},
			{"weather_wttr", `{"city": "Oslo"}`, "city:Oslo"},
		} {
			status, env := in.exec(c.tool, c.args)
			if status != 200 || env["status"] != "success" || !strings.Contains(fmt.Sprint(env["data"]), c.want) {
				t.Errorf("%s %s: %d %v", c.tool, c.args, status, env)
			}
		}
	})
	t.Run("consult", func(t *testing.T) {
		// No AI CLI, account or model is needed: as the example's header
		// says, the stand-in CLIs are built into a directory named by
		// TOOLD_EXAMPLE_CLIS and the local provider asks the stand-in
		// model server.
		clis := sharedWorkspace(t)
		build := exec.Command("go", "build", "-o", clis+"/", "../../examples/standins/cli/...")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the stand-in CLIs: %v\n%s", err, out)
		}
		api := httptest.NewServer(fakeapi.Handler())
		t.Cleanup(api.Close)
		in := start(t, map[string]string{"TOOLD_EXAMPLE_LOCAL_URL": api.URL + "/v1", "TOOLD_EXAMPLE_CLIS": clis},
			"-config", "../../examples/consult.yaml", "-workspace", sharedWorkspace(t))
		in.client.Timeout = time.Minute
		status, env := in.exec("consult_providers", `{}`)
		providers := fmt.Sprint(env["data"])
		if status != 200 || env["status"] != "success" || strings.Count(providers, "working:true") != 5 {
			t.Errorf("consult_providers, all five working: %d %v", status, env)
		}
		for _, c := range []struct{ provider, want string }{
			{"gemini", "The stand-in gemini (model gemini-2.5-pro) read your prompt (Why does TestTransfer deadlock?)"},
			{"codex", "The stand-in codex (model gpt-5-codex)"},
			{"cursor-agent", "The stand-in cursor-agent (model default)"},
			{"claude", "The stand-in claude (model sonnet)"},
			{"local", "stand-in model read your prompt"},
		} {
			status, env = in.exec("consult", `{"prompt": "Why does TestTransfer deadlock?", "provider": "`+c.provider+`"}`)
			if status != 200 || env["status"] != "success" || !strings.Contains(fmt.Sprint(env["data"]), c.want) {
				t.Errorf("consult %s: %d %v", c.provider, status, env)
			}
		}
		status, env = in.exec("consult_many", `{"prompt": "Is this lock-free queue correct?", "providers": ["gemini", "codex"]}`)
		data, _ := env["data"].(map[string]any)
		if status != 200 || env["status"] != "success" || data["success_count"] != 2.0 || !strings.Contains(fmt.Sprint(data["synthesis"]), "stand-in gemini") {
			t.Errorf("consult_many: %d %v", status, env)
		}
	})
	t.Run("mcp", func(t *testing.T) {
		interop(t)
		// As its header says: from the repository's root, the workspace
		// test/mcp (the servers' scripts are named relative to it).
		chdir(t, "../..")
		in := start(t, nil, "-config", "examples/mcp.yaml", "-workspace", "test/mcp")
		waitReady(t, in)
		for _, c := range []struct{ tool, args, want string }{
			{"everything.echo", `{"message": "hi"}`, "hi"},
			{"everything__echo", `{"message": "by its function name"}`, "by its function name"},
			{"files.read_text_file", `{"path": "package.json"}`, "@modelcontextprotocol/server-everything"},
		} {
			status, env := in.exec(c.tool, c.args)
			if status != 200 || env["status"] != "success" || !strings.Contains(fmt.Sprint(env["data"]), c.want) {
				t.Errorf("%s %s: %d %v", c.tool, c.args, status, env)
			}
		}
	})
}

// exampleRepo is a git repository with one commit and a Go module without
// dependencies, readable by the uid commands run as.
func exampleRepo(t *testing.T) string {
	t.Helper()
	ws := sharedWorkspace(t)
	files := map[string]string{
		"go.mod":       "module example.com/demo\n\ngo 1.22\n",
		"demo.go":      "package demo\n\nfunc Add(a, b int) int { return a + b }\n",
		"demo_test.go": "package demo\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"1+2\")\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first commit"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	if err := filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode()|0o444|dirX(fi))
	}); err != nil {
		t.Fatal(err)
	}
	return ws
}

func dirX(fi os.FileInfo) os.FileMode {
	if fi.IsDir() {
		return 0o111
	}
	return 0
}

func chdir(t *testing.T, dir string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(wd) })
}

// waitReady waits until every required upstream server is connected.
func waitReady(t *testing.T, in *instance) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body := in.get("/readyz")
		if status == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
