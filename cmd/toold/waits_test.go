package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/auth"
)

// Keys of the waits tests: an agent that calls, a person who approves, and
// a key that has both roles.
const (
	agentKey    = "toold_agent_key_for_wait_tests_01"
	approverKey = "toold_approver_key_for_wait_test"
	bothKey     = "toold_both_roles_key_for_waits_01"
	otherKey    = "toold_other_agent_key_for_waits_1"
	auditorKey  = "toold_auditor_key_for_wait_tests1"
)

func waitsConfig(waitTimeout string) string {
	return `
auth:
  keys:
    - {name: agent, sha256: ` + auth.Hash(agentKey) + `, tools: ["*"]}
    - {name: other, sha256: ` + auth.Hash(otherKey) + `, tools: ["*"]}
    - {name: approver, sha256: ` + auth.Hash(approverKey) + `, tools: ["*"], roles: [approve]}
    - {name: both, sha256: ` + auth.Hash(bothKey) + `, tools: ["*"], roles: [call, approve]}
    - {name: auditor, sha256: ` + auth.Hash(auditorKey) + `, tools: ["echo"], roles: [admin]}
tools:
  echo: {enabled: true, confirmation: human, limits: {wait_timeout: ` + waitTimeout + `}}
  request_user_input: {enabled: true, limits: {max_in_flight: 2, max_queue: 0, wait_timeout: ` + waitTimeout + `}}
  delegate: {enabled: true}
`
}

// waitsServer is one toold with keys and the waiting tools.
func waitsServer(t *testing.T, waitTimeout ...string) *instance {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toold.yaml")
	wt := "10m"
	if len(waitTimeout) > 0 {
		wt = waitTimeout[0]
	}
	if err := os.WriteFile(cfg, []byte(waitsConfig(wt)), 0o644); err != nil {
		t.Fatal(err)
	}
	return start(t, nil, "-config", cfg, "-workspace", workspace(t))
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// waitingEnv is what the tests read of an envelope.
type waitingEnv struct {
	Status      string
	ExecutionID string `json:"execution_id"`
	Data        json.RawMessage
	Error       *struct{ Type, Code, Message string }
	Waiting     *struct {
		For     string
		Request json.RawMessage
		Resume  string
	}
}

func decodeWaiting(t *testing.T, a *httpAnswer) waitingEnv {
	t.Helper()
	var env waitingEnv
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
	return env
}

// TestPauseAndResume: a tool that asks a person is answered 202 with its
// execution; the answer is checked against the question, resumes it on the
// server, and comes back as the tool's result. Bad resumptions are refused
// each with its status, and nothing runs twice.
func TestPauseAndResume(t *testing.T) {
	in := waitsServer(t)
	a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"Which colour?","choices":["red","blue"]}`, bearer(agentKey)...)
	env := decodeWaiting(t, a)
	if a.status != 202 || env.Status != "waiting" || env.Waiting == nil || env.Waiting.For != "input" ||
		a.header.Get("Location") != "/executions/"+env.ExecutionID || env.Waiting.Resume != "/executions/"+env.ExecutionID+"/resume" {
		t.Fatalf("the pause: %d %s", a.status, a.body)
	}
	resume := in.url + env.Waiting.Resume
	for _, bad := range []struct {
		name, body string
		key        string
		status     int
		says       string
	}{
		{"not JSON", `{"answer":`, agentKey, 400, "invalid_json"},
		{"breaks the choices", `{"answer":"green"}`, agentKey, 400, `/answer`},
		{"a result, not an answer", `{"result":"red"}`, agentKey, 400, `send it as \"answer\"`},
		{"another caller", `{"answer":"red"}`, otherKey, 404, "no_execution"},
		{"no such execution", `{"answer":"red"}`, agentKey, 404, "no_execution"},
	} {
		url := resume
		if bad.name == "no such execution" {
			url = in.url + "/executions/0123456789abcdef01234567/resume"
		}
		if a := send(t, "POST", url, bad.body, bearer(bad.key)...); a.status != bad.status || !strings.Contains(string(a.body), bad.says) {
			t.Errorf("%s: %d %s", bad.name, a.status, a.body)
		}
	}
	a = send(t, "POST", resume, `{"answer":"red"}`, append(bearer(agentKey), "Prefer", "wait=10")...)
	env = decodeWaiting(t, a)
	if a.status != 200 || env.Status != "success" || string(env.Data) != `{"answer":"red"}` {
		t.Fatalf("the resumed call: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", resume, `{"answer":"blue"}`, bearer(agentKey)...); a.status != 409 || !strings.Contains(string(a.body), "execution_ended") {
		t.Errorf("a second resumption: %d %s", a.status, a.body)
	}
}

// TestAnswerSchema: a question's schema is checked when it is asked (one
// that cannot check anything is refused at once, with the field) and holds
// the answer when it comes.
func TestAnswerSchema(t *testing.T) {
	in := waitsServer(t)
	for _, c := range []struct{ name, schema, says string }{
		{"not a schema", `{"type":5}`, "/schema"},
		{"a remote reference", `{"$ref":"http://127.0.0.1:1/s.json"}`, "/schema"},
		{"an unknown type", `{"type":"integr"}`, "/schema"},
	} {
		a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"How many?","schema":`+c.schema+`}`, bearer(agentKey)...)
		if env := decodeWaiting(t, a); a.status != 400 || env.Error == nil || env.Error.Type != "validation_error" || !strings.Contains(string(a.body), c.says) {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
	}
	a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"How many?","schema":{"type":"integer","minimum":1,"maximum":9}}`, bearer(agentKey)...)
	env := decodeWaiting(t, a)
	if a.status != 202 {
		t.Fatalf("the pause: %d %s", a.status, a.body)
	}
	for _, bad := range []string{`"three"`, `0`, `10`, `3.5`} {
		if a := send(t, "POST", in.url+env.Waiting.Resume, `{"answer":`+bad+`}`, bearer(agentKey)...); a.status != 400 || !strings.Contains(string(a.body), `"/answer`) {
			t.Errorf("answer %s: %d %s", bad, a.status, a.body)
		}
	}
	a = send(t, "POST", in.url+env.Waiting.Resume, `{"answer":3}`, append(bearer(agentKey), "Prefer", "wait=10")...)
	if got := decodeWaiting(t, a); got.Status != "success" || string(got.Data) != `{"answer":3}` {
		t.Errorf("a fitting answer: %d %s", a.status, a.body)
	}
}

// TestTokenConfirmedPause: a tool whose confirmation is a token spends
// the token on its first step; the step that runs after an answer is not
// challenged again, whether the call was sync (parked) or async.
func TestTokenConfirmedPause(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toold.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  request_user_input: {enabled: true, confirmation: token}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", workspace(t))
	for _, mode := range []string{"sync", "async"} {
		body := `{"prompt":"Deploy ` + mode + `?"}`
		var token struct {
			Error struct {
				ConfirmToken string `json:"confirm_token"`
			}
		}
		a := send(t, "POST", in.url+"/tools/request_user_input/execute", body)
		if err := json.Unmarshal(a.body, &token); err != nil || a.status != 428 || token.Error.ConfirmToken == "" {
			t.Fatalf("%s: the challenge: %d %s", mode, a.status, a.body)
		}
		hdr := []string{"Toold-Confirm", token.Error.ConfirmToken}
		if mode == "async" {
			hdr = append(hdr, "Prefer", "respond-async, wait=10")
		}
		a = send(t, "POST", in.url+"/tools/request_user_input/execute", body, hdr...)
		env := decodeWaiting(t, a)
		if a.status != 202 || env.Waiting == nil {
			t.Fatalf("%s: the confirmed call did not wait: %d %s", mode, a.status, a.body)
		}
		a = send(t, "POST", in.url+env.Waiting.Resume, `{"answer":"yes"}`, "Prefer", "wait=10")
		if got := decodeWaiting(t, a); got.Status != "success" || string(got.Data) != `{"answer":"yes"}` {
			t.Errorf("%s: the step after the answer: %d %s", mode, a.status, a.body)
		}
	}
}

// TestWaitingInBatch: a call of a batch has no execution to wait in: a
// tool that pauses, or a call that needs an approval, is answered so, and
// the rest of the batch runs.
func TestWaitingInBatch(t *testing.T) {
	in := waitsServer(t)
	for _, prefer := range []string{"", "respond-async, wait=10"} {
		a := send(t, "POST", in.url+"/batch", `{"calls":[{"id":"ask","tool":"request_user_input","arguments":{"prompt":"?"}},`+
			`{"id":"approve","tool":"echo","arguments":{"message":"x"}},{"id":"plain","tool":"list_files","arguments":{}}]}`,
			append(bearer(agentKey), "Prefer", prefer)...)
		if a.status != 200 || strings.Count(string(a.body), `"code":"waits_in_batch"`) != 2 || strings.Contains(string(a.body), `"status":"waiting"`) ||
			!strings.Contains(string(a.body), `"success_count":1`) {
			t.Errorf("Prefer %q: %d %s", prefer, a.status, a.body)
		}
	}
}

// TestWaitingHoldsNoSlot: a tool with 2 slots and no queue takes far more
// than 2 waiting calls: a waiting call holds no slot.
func TestWaitingHoldsNoSlot(t *testing.T) {
	in := waitsServer(t)
	for i := range 6 {
		a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"question"}`, bearer(agentKey)...)
		if a.status != 202 {
			t.Fatalf("waiting call %d: %d %s", i+1, a.status, a.body)
		}
	}
	if in.gauge(t, `toold_tool_in_flight{tool="request_user_input"}`) != "0" {
		t.Error("waiting calls hold slots")
	}
}

// TestWaitExpires: a wait longer than the tool's wait_timeout ends the
// execution with a timeout_error (wait_expired); a late answer is refused.
func TestWaitExpires(t *testing.T) {
	in := waitsServer(t, "1s")
	a := send(t, "POST", in.url+"/tools/request_user_input/execute", `{"prompt":"quick?"}`, bearer(agentKey)...)
	env := decodeWaiting(t, a)
	if a.status != 202 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	approval := decodeWaiting(t, send(t, "POST", in.url+"/tools/echo/execute", `{"message":"too late"}`, bearer(agentKey)...))
	if approval.Waiting == nil || approval.Waiting.For != "approval" {
		t.Fatalf("a call waiting for approval: %+v", approval)
	}
	// Once its stream says it ended (the wait's second is up), it is read,
	// and approved too late.
	awaitEnd(t, in, approval.ExecutionID)
	a = send(t, "GET", in.url+"/executions/"+approval.ExecutionID, "", bearer(agentKey)...)
	if got := decodeWaiting(t, a); got.Status != "timeout" || got.Error == nil || got.Error.Code != "wait_expired" {
		t.Errorf("the approval that timed out: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", in.url+"/approvals/"+approval.ExecutionID, `{"approve":true}`, bearer(approverKey)...); a.status != 409 ||
		!strings.Contains(string(a.body), "wait_expired") {
		t.Errorf("approving a call that timed out: %d %s", a.status, a.body)
	}
	awaitEnd(t, in, env.ExecutionID)
	a = send(t, "GET", in.url+"/executions/"+env.ExecutionID, "", bearer(agentKey)...)
	if got := decodeWaiting(t, a); got.Status != "timeout" || got.Error == nil || got.Error.Code != "wait_expired" {
		t.Fatalf("an expired wait: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", in.url+env.Waiting.Resume, `{"answer":"late"}`, bearer(agentKey)...); a.status != 409 {
		t.Errorf("a late answer: %d %s", a.status, a.body)
	} else if !strings.Contains(string(a.body), "wait_expired") {
		t.Errorf("a late answer is not told its wait expired: %s", a.body)
	}
}

// awaitEnd waits until the agent's execution id ends, as its event
// stream says (?wait= answers at a wait as well as at the end).
func awaitEnd(t *testing.T, in *instance, id string) {
	t.Helper()
	events := sseEvents(t, in.url+"/executions/"+id+"/events", func(name, _ string) bool {
		return name != "pending" && name != "start" && name != "waiting" && name != "resumed"
	}, agentKey)
	if len(events) == 0 || slices.Contains([]string{"pending", "start", "waiting", "resumed"}, events[len(events)-1]) {
		t.Fatalf("execution %s did not end: its events %v", id, events)
	}
}

func (in *instance) gauge(t *testing.T, series string) string {
	t.Helper()
	resp, err := http.Get(in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return ""
}

// TestHumanApproval: a tool whose confirmation is human waits for an
// approver; the caller cannot approve, nor can a key without the role, nor
// (by default) the caller's own key; an approval runs it, a denial ends it
// with the reason, and a second decision is refused.
func TestHumanApproval(t *testing.T) {
	in := waitsServer(t)
	call := func(key string) waitingEnv {
		a := send(t, "POST", in.url+"/tools/echo/execute", `{"message":"deploy"}`, bearer(key)...)
		env := decodeWaiting(t, a)
		if a.status != 202 || env.Waiting == nil || env.Waiting.For != "approval" || env.Waiting.Resume != "" {
			t.Fatalf("a call waiting for approval: %d %s", a.status, a.body)
		}
		return env
	}
	approved, denied, own := call(agentKey), call(agentKey), call(bothKey)

	a := send(t, "GET", in.url+"/approvals", "", bearer(approverKey)...)
	if a.status != 200 || !strings.Contains(string(a.body), approved.ExecutionID) || !strings.Contains(string(a.body), `"caller":"agent"`) {
		t.Fatalf("GET /approvals: %d %s", a.status, a.body)
	}
	for _, c := range []struct {
		name, key, id string
		status        int
		says          string
	}{
		{"the caller has no approve role", agentKey, approved.ExecutionID, 403, "missing_role"},
		{"an approver's own call", bothKey, own.ExecutionID, 403, "self_approval"},
		{"no such call", approverKey, "0123456789abcdef01234567", 404, "no_approval"},
	} {
		if a := send(t, "POST", in.url+"/approvals/"+c.id, `{"approve":true}`, bearer(c.key)...); a.status != c.status || !strings.Contains(string(a.body), c.says) {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
	}
	if a := send(t, "POST", in.url+"/approvals/"+approved.ExecutionID, `{"approve":"yes"}`, bearer(approverKey)...); a.status != 400 {
		t.Errorf("a malformed decision: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", in.url+"/approvals/"+approved.ExecutionID, `{"approve":true,"reason":"planned"}`, bearer(approverKey)...); a.status != 200 {
		t.Fatalf("approve: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", in.url+"/approvals/"+denied.ExecutionID, `{"approve":false,"reason":"not today"}`, bearer(approverKey)...); a.status != 200 {
		t.Fatalf("deny: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", in.url+"/approvals/"+denied.ExecutionID, `{"approve":true}`, bearer(approverKey)...); a.status != 409 ||
		!strings.Contains(string(a.body), "already_decided") {
		t.Errorf("a second decision: %d %s", a.status, a.body)
	}
	a = send(t, "GET", in.url+"/executions/"+approved.ExecutionID+"?wait=10s", "", bearer(agentKey)...)
	if env := decodeWaiting(t, a); env.Status != "success" || !strings.Contains(string(env.Data), "deploy") {
		t.Errorf("the approved call: %d %s", a.status, a.body)
	}
	a = send(t, "GET", in.url+"/executions/"+denied.ExecutionID, "", bearer(agentKey)...)
	if env := decodeWaiting(t, a); env.Error == nil || env.Error.Code != "denied" || !strings.Contains(env.Error.Message, "not today") {
		t.Errorf("the denied call: %d %s", a.status, a.body)
	}
	a = send(t, "GET", in.url+"/approvals", "", bearer(approverKey)...)
	if strings.Contains(string(a.body), approved.ExecutionID) || strings.Contains(string(a.body), denied.ExecutionID) {
		t.Errorf("decided calls are still listed: %s", a.body)
	}
	// Every decision and every refused attempt is in the audit log, once
	// the last (the second decision, refused) is.
	a.body = []byte(in.waitAudit(t, auditorKey, regexp.MustCompile(`"action":"decision_refused",[^}]*: already_decided"`)))
	for _, want := range []string{
		`"caller":"approver","action":"approve","duration_ms":0,"request_id":"[^"]+","target":"execution ` + approved.ExecutionID + `: echo called by agent; reason: planned"`,
		`"caller":"approver","action":"deny",[^}]*"target":"execution ` + denied.ExecutionID + `: echo called by agent; reason: not today"`,
		`"caller":"agent","action":"refused",[^}]*"target":"POST /approvals/` + approved.ExecutionID + `: the key lacks the approve role"`,
		`"caller":"both","action":"decision_refused",[^}]*"target":"execution ` + own.ExecutionID + `: self_approval"`,
		`"caller":"approver","action":"decision_refused",[^}]*"target":"execution ` + denied.ExecutionID + `: already_decided"`,
	} {
		if !regexp.MustCompile(want).Match(a.body) {
			t.Errorf("the audit log lacks %s\n%s", want, a.body)
		}
	}
}

// TestDelegateAgentLoop plays an agent loop: the model calls delegate; its
// task system performs the subtask — which delegates a part again, with
// the parent's id — resumes each with its result, and the model gets the
// result as the tool's answer. A subtask that repeats its parent is a
// cycle and refused.
func TestDelegateAgentLoop(t *testing.T) {
	in := waitsServer(t)
	key := bearer(agentKey)
	a := send(t, "POST", in.url+"/tools/delegate/execute", `{"description":"Summarise the failures","inputs":{"log":"3 failed"},"template_hints":["debugging"]}`, key...)
	parent := decodeWaiting(t, a)
	if a.status != 202 || parent.Waiting.For != "subtask" || !strings.Contains(string(parent.Waiting.Request), `"description":"Summarise the failures"`) {
		t.Fatalf("delegate: %d %s", a.status, a.body)
	}
	// The task system performs it; part of it is delegated again.
	a = send(t, "POST", in.url+"/tools/delegate/execute", `{"description":"Count the failures","inputs":{"log":"3 failed"},"parent":"`+parent.ExecutionID+`"}`, key...)
	child := decodeWaiting(t, a)
	if a.status != 202 || child.Waiting.For != "subtask" {
		t.Fatalf("the nested delegate: %d %s", a.status, a.body)
	}
	a = send(t, "POST", in.url+"/tools/delegate/execute", `{"description":"Summarise the failures","inputs":{"log":"3 failed"},"parent":"`+parent.ExecutionID+`"}`, key...)
	if env := decodeWaiting(t, a); a.status != 200 || env.Error == nil || env.Error.Code != "cycle" {
		t.Errorf("a cycle: %d %s", a.status, a.body)
	}
	a = send(t, "POST", in.url+child.Waiting.Resume, `{"result":{"count":3}}`, append(key, "Prefer", "wait=10")...)
	if env := decodeWaiting(t, a); env.Status != "success" || !strings.Contains(string(env.Data), `"result":{"count":3}`) || !strings.Contains(string(env.Data), `"depth":2`) {
		t.Fatalf("the nested result: %d %s", a.status, a.body)
	}
	a = send(t, "POST", in.url+parent.Waiting.Resume, `{"result":"three tests failed: all in package fs"}`, append(key, "Prefer", "wait=10")...)
	if env := decodeWaiting(t, a); env.Status != "success" || !strings.Contains(string(env.Data), "all in package fs") || !strings.Contains(string(env.Data), `"depth":1`) {
		t.Fatalf("the result as the tool's answer: %d %s", a.status, a.body)
	}
}

// TestStreamedPause: a streaming caller sees the waiting event with the
// request, and the stream goes on, to the end, when the call is resumed.
func TestStreamedPause(t *testing.T) {
	in := waitsServer(t)
	req, _ := http.NewRequest("POST", in.url+"/tools/request_user_input/execute", strings.NewReader(`{"prompt":"Go on?"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+agentKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var seen []string
	deadline := time.AfterFunc(20*time.Second, func() { resp.Body.Close() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		name, ok := strings.CutPrefix(line, "event: ")
		if !ok {
			continue
		}
		seen = append(seen, name)
		if name == "waiting" {
			sc.Scan()
			var env waitingEnv
			_ = json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &env)
			if env.Waiting == nil || !strings.Contains(string(env.Waiting.Request), "Go on?") {
				t.Fatalf("the waiting event: %s", sc.Text())
			}
			resumed := make(chan *httpAnswer, 1)
			go func() { resumed <- resumeQuietly(in.url+env.Waiting.Resume, `{"answer":"yes"}`, agentKey) }()
			defer func() {
				if a := <-resumed; a == nil || a.status != 202 {
					t.Errorf("the resumption: %+v", a)
				}
			}()
		}
		if name == "end" || name == "error" {
			break
		}
	}
	if got := strings.Join(seen, " "); !strings.HasPrefix(got, "start waiting") || !strings.HasSuffix(got, "end") || !strings.Contains(got, "resumed") {
		t.Errorf("events %q", got)
	}
}

// resumeQuietly posts a resumption from another goroutine (no t.Fatal).
func resumeQuietly(url, body, key string) *httpAnswer {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	return &httpAnswer{status: resp.StatusCode}
}

// TestStdioWaits: toold -stdio with a store runs the executions it parks:
// a 2026-07-28 host answers request_user_input through elicitation, and
// the resumed step runs in the same process.
func TestStdioWaits(t *testing.T) {
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toold.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  request_user_input: {enabled: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-stdio", "-config", cfg, "-workspace", workspace(t), "-state-dir", filepath.Join(dir, "state"))
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "release"}}, nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_user_input", Arguments: map[string]any{"prompt": "Which branch?"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(got) != `{"answer":"release"}` {
		t.Fatalf("the answered call over stdio: %s %+v", got, res.Content)
	}
}
