package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/state/statetest"
)

// hostsConfig has the tools that wait for a person or a question — echo
// waits for an approver, sleep for its host's confirmation token,
// request_user_input for the user's answer — and keys for an agent and an
// approver; extra is appended (a shared store).
func hostsConfig(extra string) string {
	return `
auth:
  keys:
    - {name: agent, sha256: ` + auth.Hash(agentKey) + `, tools: ["*"]}
    - {name: approver, sha256: ` + auth.Hash(approverKey) + `, tools: ["*"], roles: [approve]}
tools:
  echo: {enabled: true, confirmation: human}
  sleep: {enabled: true, confirmation: token}
  request_user_input: {enabled: true}
` + extra
}

// tsEvent is a line test/mcp/tasks.mjs prints.
type tsEvent struct {
	Event         string
	TaskID        string
	Status        string
	StatusMessage string
	Message       string
	Meta          map[string]any
	TaskSupport   string
	Tasks         json.RawMessage
	TaskIDs       []string
	Result        *struct {
		IsError           bool
		StructuredContent map[string]any
		Meta              map[string]any `json:"_meta"`
	}
}

// tsTask runs the TypeScript SDK's task client (test/mcp/tasks.mjs) with
// env, against args (http <url>, or stdio <command>...), handing each line
// it prints to act as it comes; it returns them all.
func tsTask(t *testing.T, dir string, env []string, act func(tsEvent), args ...string) []tsEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "tasks.mjs")}, args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var events []tsEvent
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev tsEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("the TypeScript client printed %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
		act(ev)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the TypeScript client: %v\nevents: %+v\nstderr: %s", err, events, stderr.String())
	}
	return events
}

// onceWaiting runs do once, with the task's id, the first time the client
// sees the task waiting (input_required).
func onceWaiting(do func(id string)) func(tsEvent) {
	done := false
	return func(ev tsEvent) {
		if ev.Event == "taskStatus" && ev.Status == "input_required" && !done {
			done = true
			do(ev.TaskID)
		}
	}
}

// checkTaskRun holds a task client's run to what MCP tasks promise: toold
// declared tasks, the tool says it may run as one, the task was created,
// the result names it and holds want, and the task is listed and
// completed.
func checkTaskRun(t *testing.T, events []tsEvent, want map[string]any) string {
	t.Helper()
	var id string
	var result *tsEvent
	for i, ev := range events {
		switch ev.Event {
		case "connected":
			if len(ev.Tasks) == 0 || string(ev.Tasks) == "null" {
				t.Errorf("toold declared no tasks: %+v", ev)
			}
		case "listed":
			if ev.TaskSupport != "optional" {
				t.Errorf("the tool's taskSupport: %+v", ev)
			}
		case "taskCreated":
			id = ev.TaskID
		case "result":
			result = &events[i]
		case "listed-tasks":
			if !strings.Contains(strings.Join(ev.TaskIDs, " "), id) {
				t.Errorf("tasks/list lacks %s: %v", id, ev.TaskIDs)
			}
		case "final":
			if ev.Status != "completed" {
				t.Errorf("the task ended %s", ev.Status)
			}
		case "error":
			t.Errorf("the client saw an error: %+v", ev)
		}
	}
	if id == "" || result == nil || result.Result.IsError || fmt.Sprint(result.Result.Meta["io.modelcontextprotocol/related-task"]) != "map[taskId:"+id+"]" {
		t.Fatalf("the task's run: %+v", events)
	}
	for k, v := range want {
		if result.Result.StructuredContent[k] != v {
			t.Errorf("the result: %v, want %s = %v", result.Result.StructuredContent, k, v)
		}
	}
	return id
}

// TestTypeScriptTasks: the official TypeScript SDK calls tools as tasks
// over /mcp. A call that needs an approver is approved in the console (its
// route, POST /approvals/{id}, with the approver's key) while the client
// waits in tasks/result, and the client gets the tool's result; a question
// is answered in the console (POST /executions/{id}/resume) the same way,
// or by the client itself when it declared elicitation.
func TestTypeScriptTasks(t *testing.T) {
	dir := interop(t)
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(cfg, []byte(hostsConfig("")), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", workspace(t))
	url := in.url + "/mcp"
	t.Run("approved in the console", func(t *testing.T) {
		events := tsTask(t, dir, []string{"TOOL=echo", `ARGS={"message":"approved"}`, "KEY=" + agentKey}, onceWaiting(func(id string) {
			if a := send(t, "POST", in.url+"/approvals/"+id, `{"approve":true,"reason":"ok"}`, bearer(approverKey)...); a.status != 200 {
				t.Errorf("approve: %d %s", a.status, a.body)
			}
		}), "http", url)
		checkTaskRun(t, events, map[string]any{"message": "approved"})
	})
	t.Run("answered in the console", func(t *testing.T) {
		events := tsTask(t, dir, []string{"TOOL=request_user_input", `ARGS={"prompt":"Which branch?"}`, "KEY=" + agentKey}, onceWaiting(func(id string) {
			if a := send(t, "POST", in.url+"/executions/"+id+"/resume", `{"answer":"main"}`, bearer(agentKey)...); a.status >= 300 {
				t.Errorf("answer: %d %s", a.status, a.body)
			}
		}), "http", url)
		checkTaskRun(t, events, map[string]any{"answer": "main"})
	})
	t.Run("answered by the client", func(t *testing.T) {
		events := tsTask(t, dir, []string{"TOOL=request_user_input", `ARGS={"prompt":"Which branch?"}`, "KEY=" + agentKey,
			`ELICIT={"answer":"dev"}`}, func(tsEvent) {}, "http", url)
		id := checkTaskRun(t, events, map[string]any{"answer": "dev"})
		for _, ev := range events {
			if ev.Event == "elicited" && (ev.Message != "Which branch?" || fmt.Sprint(ev.Meta["io.modelcontextprotocol/related-task"]) != "map[taskId:"+id+"]") {
				t.Errorf("the question: %+v", ev)
			}
		}
	})
}

// TestTypeScriptTasksOverStdio: a desktop host's toold -stdio acts as the
// key -stdio-key names and shares its store with a toold that serves the
// console: a task that needs an approver, created over stdio, is approved
// there, and the host's tasks/result over stdio answers the result.
func TestTypeScriptTasksOverStdio(t *testing.T) {
	dir := interop(t)
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	ns := statetest.StartServer(t)
	shared := func(name string) string {
		return hostsConfig(fmt.Sprintf("state: {replica: %s, nats: {url: %q}, audit: {enabled: false}}\n", name, ns.URL))
	}
	tmp := t.TempDir()
	consoleCfg, hostCfg := filepath.Join(tmp, "console.yaml"), filepath.Join(tmp, "host.yaml")
	for path, body := range map[string]string{consoleCfg: shared("console"), hostCfg: shared("desktop")} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	console := start(t, nil, "-config", consoleCfg, "-workspace", workspace(t))
	events := tsTask(t, dir, []string{"TOOL=echo", `ARGS={"message":"from the desktop"}`}, onceWaiting(func(id string) {
		if a := send(t, "POST", console.url+"/approvals/"+id, `{"approve":true}`, bearer(approverKey)...); a.status != 200 {
			t.Errorf("approve in the console: %d %s", a.status, a.body)
		}
	}), "stdio", bin, "-stdio", "-stdio-key", "agent", "-config", hostCfg, "-workspace", workspace(t), "-log-level", "warn")
	id := checkTaskRun(t, events, map[string]any{"message": "from the desktop"})
	// The task is the agent key's execution, on either replica.
	if a := send(t, "GET", console.url+"/executions/"+id, "", bearer(agentKey)...); a.status != 200 || a.env.Status != "success" {
		t.Errorf("the task over REST: %d %s", a.status, a.body)
	}
}

// TestGoSDKClientsFinishInsideMCP: the Go SDK's client at 2025-11-25 and
// at 2026-07-28, over stdio (toold -stdio -stdio-key, keys configured)
// and over HTTP, finishes inside MCP what needs its user: a question
// (elicitation: toold's own request before 2026-07-28, an input_required
// result at 2026-07-28) and a confirmation token (a yes/no form).
func TestGoSDKClientsFinishInsideMCP(t *testing.T) {
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(cfg, []byte(hostsConfig("")), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", workspace(t))
	var mu sync.Mutex
	var asked []string
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, r.Params.Message)
		mu.Unlock()
		if strings.HasPrefix(r.Params.Message, "Run the tool") {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "release"}}, nil
	}}
	for _, version := range mcpVersions {
		transports := map[string]mcp.Transport{
			"stdio": &mcp.CommandTransport{Command: exec.Command(bin, "-stdio", "-stdio-key", "agent", "-config", cfg,
				"-workspace", workspace(t), "-state-dir", t.TempDir(), "-log-level", "warn")},
			"http": &mcp.StreamableClientTransport{Endpoint: in.url + "/mcp", MaxRetries: -1, HTTPClient: keyClient(agentKey)},
		}
		for name, transport := range transports {
			who := name + " " + version
			cs := goClient(t, transport, version, opts)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_user_input", Arguments: map[string]any{"prompt": "Which branch?"}})
			if err != nil || res.IsError || fmt.Sprint(res.StructuredContent) != "map[answer:release]" {
				t.Errorf("%s: a question: %v %+v", who, err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 1}})
			if err != nil || res.IsError {
				t.Errorf("%s: a confirmed call: %v %+v", who, err, res)
			}
			cancel()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(asked); n != 8 {
		t.Errorf("the user was asked %d times, want 8 (two questions per client): %q", n, asked)
	}
}

// TestStdioNeedsAKeyWhereKeysExist: toold -stdio with keys configured and
// no -stdio-key refuses to start, saying what to pass; a -stdio-key that
// names no key is a configuration problem.
func TestStdioNeedsAKeyWhereKeysExist(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(cfg, []byte(hostsConfig("")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "pass -stdio-key NAME"},
		{[]string{"-stdio-key", "nobody"}, `mcp.stdio_key: "nobody" names no key of auth.keys`},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), append([]string{"-stdio", "-config", cfg, "-workspace", t.TempDir()}, tc.args...),
			func(string) (string, bool) { return "", false }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
		if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: %v, stderr %q, want exit 2 saying %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

// keyClient is an HTTP client that presents key.
func keyClient(key string) *http.Client {
	return &http.Client{Transport: apitest.Bearer(key, nil)}
}
