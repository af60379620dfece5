package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/registry"
)

// rpcMessage is one JSON-RPC message of an answer.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// rpcAnswer is an /mcp answer: its status and headers, and its messages
// (a JSON body's one, or an event stream's, in order).
type rpcAnswer struct {
	status int
	header http.Header
	msgs   []rpcMessage
}

// last is the answer's response (its last message).
func (a rpcAnswer) last(t *testing.T) rpcMessage {
	t.Helper()
	if len(a.msgs) == 0 {
		t.Fatalf("no messages: %d", a.status)
	}
	return a.msgs[len(a.msgs)-1]
}

// rpcCall posts one JSON-RPC message with the key and headers given
// (Mcp-Protocol-Version, Mcp-Session-Id, ...), through the contract
// checker. onEvent, when set, sees each message of an event stream as it
// arrives (to answer toold's questions while the request is open).
func (h *harness) rpcCall(key string, header map[string]string, body string, onEvent func(rpcMessage)) rpcAnswer {
	h.t.Helper()
	return h.rpcCallAt("/mcp", key, header, body, onEvent)
}

// rpcCallAt is rpcCall to path (a toolset's /mcp/<toolset>).
func (h *harness) rpcCallAt(path, key string, header map[string]string, body string, onEvent func(rpcMessage)) rpcAnswer {
	h.t.Helper()
	hd := map[string]string{}
	for k, v := range header {
		hd[k] = v
	}
	if key != "" {
		hd["Authorization"] = "Bearer " + key
	}
	resp := h.send(path, body, hd, 30*time.Second)
	defer resp.Body.Close()
	a := rpcAnswer{status: resp.StatusCode, header: resp.Header}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		var m rpcMessage
		if len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &m); err != nil {
				h.t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
			}
			a.msgs = append(a.msgs, m)
		}
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m rpcMessage
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			h.t.Fatalf("event %s: %v", d, err)
		}
		a.msgs = append(a.msgs, m)
		if onEvent != nil {
			onEvent(m)
		}
	}
	return a
}

// taskView is what the tests read of a task.
type taskView struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func decodeInto(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

var v1125 = map[string]string{"Mcp-Protocol-Version": "2025-11-25"}

func request(id int, method, params string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `","params":` + params + `}`
}

// TestTaskCapabilities: toold declares tasks to a 2025-11-25 client that
// declared them, where it keeps executions, and the tools that may wait
// for a person or a question say they may run as tasks.
func TestTaskCapabilities(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true})
	bare := newHarness(t, harnessOpts{})
	init := func(version, caps string) string {
		return request(1, "initialize", `{"protocolVersion":"`+version+`","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}`)
	}
	for _, tc := range []struct {
		name    string
		h       *harness
		body    string
		declare bool
	}{
		{"2025-11-25 with tasks", h, init("2025-11-25", `{"tasks":{"requests":{}}}`), true},
		{"2025-11-25 without tasks", h, init("2025-11-25", `{}`), false},
		{"2025-06-18 with tasks", h, init("2025-06-18", `{"tasks":{}}`), false},
		{"no store", bare, init("2025-11-25", `{"tasks":{}}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.h.rpcCall("", nil, tc.body, nil)
			var res struct {
				Capabilities struct {
					Tasks *struct {
						List, Cancel json.RawMessage
						Requests     struct {
							Tools struct{ Call json.RawMessage }
						}
					} `json:"tasks"`
					Tools json.RawMessage `json:"tools"`
				} `json:"capabilities"`
			}
			decodeInto(t, a.last(t).Result, &res)
			if got := res.Capabilities.Tasks != nil; got != tc.declare || res.Capabilities.Tools == nil {
				t.Fatalf("tasks declared: %v, want %v: %s", got, tc.declare, a.last(t).Result)
			}
			if tc.declare && (res.Capabilities.Tasks.List == nil || res.Capabilities.Tasks.Cancel == nil || res.Capabilities.Tasks.Requests.Tools.Call == nil) {
				t.Errorf("the tasks capability: %s", a.last(t).Result)
			}
		})
	}
	a := h.rpcCall("", v1125, request(2, "tools/list", `{}`), nil)
	var list struct {
		Tools []struct {
			Name      string
			Execution *struct{ TaskSupport string }
		}
	}
	decodeInto(t, a.last(t).Result, &list)
	want := map[string]bool{"guarded": true, "guarded_ask": true, "request_user_input": true, "delegate": true}
	for _, tl := range list.Tools {
		if got := tl.Execution != nil && tl.Execution.TaskSupport == "optional"; got != want[tl.Name] {
			t.Errorf("%s: execution %+v", tl.Name, tl.Execution)
		}
	}
}

// TestTaskApprovedInTheConsole: a tool that needs a person's approval,
// called as a task, answers at once with its task; tasks/get says what it
// waits for and where a person decides; the task is the execution REST
// shows and lists; tasks/result blocks until an approver decides (through
// the console's route) and then answers the tool's result, naming the
// task, with the task's changes streamed on the way.
func TestTaskApprovedInTheConsole(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true, keys: true})
	a := h.rpcCall(fullKey, v1125, request(1, "tools/call", `{"name":"guarded","arguments":{},"task":{"ttl":60000}}`), nil)
	var created struct {
		Task taskView       `json:"task"`
		Meta map[string]any `json:"_meta"`
	}
	decodeInto(t, a.last(t).Result, &created)
	id := created.Task.TaskID
	immediate, _ := created.Meta["io.modelcontextprotocol/model-immediate-response"].(string)
	if a.status != 200 || id == "" || created.Task.Status != "working" && created.Task.Status != "input_required" ||
		created.Task.TTL == nil || !strings.Contains(immediate, "approval") || !strings.Contains(immediate, "/console/#approvals") ||
		strings.Contains(immediate, "/approvals/"+id) {
		t.Fatalf("the task created: %d %s", a.status, a.last(t).Result)
	}
	task := h.waitTask(fullKey, id, "input_required")
	if !strings.Contains(task.StatusMessage, "/console/#approvals") || strings.Contains(task.StatusMessage, "POST /approvals/") {
		t.Errorf("what the task waits for: %q", task.StatusMessage)
	}
	// The same execution over REST, and only its caller's.
	if code, body := h.get("/executions/"+id, fullKey); code != 200 || !strings.Contains(body, `"status":"waiting"`) {
		t.Errorf("GET /executions/%s: %d %s", id, code, body)
	}
	for key, want := range map[string]bool{fullKey: true, echoKey: false} {
		a := h.rpcCall(key, v1125, request(3, "tasks/list", `{}`), nil)
		if got := strings.Contains(string(a.last(t).Result), id); got != want {
			t.Errorf("tasks/list of %s lists the task: %v: %s", key[:10], got, a.last(t).Result)
		}
	}
	if e := h.rpcCall(echoKey, v1125, request(4, "tasks/get", `{"taskId":"`+id+`"}`), nil).last(t).Error; e == nil || e.Code != -32602 {
		t.Errorf("another key's tasks/get: %+v", e)
	}

	// tasks/result streams the task's state at once; the approver decides
	// while it waits.
	approved := false
	res := h.rpcCall(fullKey, v1125, request(5, "tasks/result", `{"taskId":"`+id+`"}`), func(m rpcMessage) {
		if approved || m.Method != "notifications/tasks/status" {
			return
		}
		approved = true
		if code, body := h.postJSON("/approvals/"+id, approverKey, `{"approve":true,"reason":"fine"}`); code != 200 {
			t.Errorf("approve: %d %s", code, body)
		}
	})
	var result struct {
		Meta              map[string]json.RawMessage `json:"_meta"`
		StructuredContent map[string]any
		IsError           bool
	}
	decodeInto(t, res.last(t).Result, &result)
	if result.IsError || result.StructuredContent["ran"] != true || !strings.Contains(string(result.Meta["io.modelcontextprotocol/related-task"]), id) {
		t.Fatalf("tasks/result: %s", res.last(t).Result)
	}
	statuses := []string{}
	for _, m := range res.msgs[:len(res.msgs)-1] {
		var st taskView
		decodeInto(t, m.Params, &st)
		if m.Method != "notifications/tasks/status" || st.TaskID != id {
			t.Errorf("a message before the result: %+v", m)
		}
		statuses = append(statuses, st.Status)
	}
	if len(statuses) == 0 || statuses[0] != "input_required" || statuses[len(statuses)-1] != "completed" {
		t.Errorf("the statuses streamed: %v", statuses)
	}
	if got := h.waitTask(fullKey, id, "completed"); got.PollInterval != 0 {
		t.Errorf("a task that ended: %+v", got)
	}
	if e := h.rpcCall(fullKey, v1125, request(6, "tasks/cancel", `{"taskId":"`+id+`"}`), nil).last(t).Error; e == nil || e.Code != -32602 ||
		!strings.Contains(e.Message, "completed") {
		t.Errorf("cancelling a completed task: %+v", e)
	}
}

// TestTaskRefusals: what cannot be a task is refused as the specification
// says, each with a message saying why.
func TestTaskRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true, keys: true})
	for _, tc := range []struct {
		name, body string
		code       int64
		says       string
	}{
		{"a tool that does not run as a task", request(1, "tools/call", `{"name":"echo","arguments":{"message":"m"},"task":{}}`), -32601, "without params.task"},
		{"an unknown tool", request(2, "tools/call", `{"name":"nope","arguments":{},"task":{}}`), -32602, `unknown tool "nope"`},
		{"arguments that do not fit", request(3, "tools/call", `{"name":"request_user_input","arguments":{"prompt":5},"task":{}}`), -32602, "/prompt"},
		{"no task id", request(4, "tasks/get", `{}`), -32602, "taskId is required"},
		{"an unknown task", request(5, "tasks/get", `{"taskId":"0123456789abcdef01234567"}`), -32602, "no task"},
		{"not an execution id", request(6, "tasks/result", `{"taskId":"../x"}`), -32602, "no task"},
		{"a cursor toold never gave", request(7, "tasks/list", `{"cursor":"x"}`), -32602, "cursor"},
		{"a float id", `{"jsonrpc":"2.0","id":1.5,"method":"tasks/list","params":{}}`, -32600, "Invalid Request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := h.rpcCall(fullKey, v1125, tc.body, nil).last(t).Error
			if e == nil || e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
				t.Errorf("got %+v, want %d saying %q", e, tc.code, tc.says)
			}
		})
	}
}

// TestTaskCancelled: a task that waits for an answer is cancelled with
// tasks/cancel; its result is the cancelled call's.
func TestTaskCancelled(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true})
	a := h.rpcCall("", v1125, request(1, "tools/call", `{"name":"request_user_input","arguments":{"prompt":"Which?"},"task":{}}`), nil)
	var created struct{ Task taskView }
	decodeInto(t, a.last(t).Result, &created)
	id := created.Task.TaskID
	if task := h.waitTask("", id, "input_required"); !strings.Contains(task.StatusMessage, "Which?") ||
		!strings.Contains(task.StatusMessage, "/executions/"+id+"/resume") {
		t.Errorf("what the task waits for: %q", task.StatusMessage)
	}
	var cancelled taskView
	decodeInto(t, h.rpcCall("", v1125, request(2, "tasks/cancel", `{"taskId":"`+id+`"}`), nil).last(t).Result, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Fatalf("tasks/cancel: %+v", cancelled)
	}
	var result struct {
		IsError bool
		Content []struct{ Text string }
	}
	decodeInto(t, h.rpcCall("", v1125, request(3, "tasks/result", `{"taskId":"`+id+`"}`), nil).last(t).Result, &result)
	if !result.IsError || len(result.Content) == 0 || !strings.Contains(result.Content[0].Text, "cancelled") {
		t.Errorf("the cancelled task's result: %+v", result)
	}
}

// waitTask polls tasks/get until the task has the status.
func (h *harness) waitTask(key, id, status string) taskView {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := h.rpcCall(key, v1125, request(99, "tasks/get", `{"taskId":"`+id+`"}`), nil)
		var task taskView
		if m := a.last(h.t); m.Error == nil {
			decodeInto(h.t, m.Result, &task)
		}
		if task.Status == status || time.Now().After(deadline) {
			if task.Status != status {
				h.t.Fatalf("task %s: %+v, want %s", id, task, status)
			}
			return task
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get and postJSON call toold's REST routes with a key.
func (h *harness) get(path, key string) (int, string) {
	h.t.Helper()
	return h.rest(http.MethodGet, path, key, "")
}

func (h *harness) postJSON(path, key, body string) (int, string) {
	h.t.Helper()
	return h.rest(http.MethodPost, path, key, body)
}

func (h *harness) rest(method, path, key, body string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// v2 is what a 2026-07-28 request carries: the protocol version in the
// header and in _meta, with the client's capabilities (the tasks
// extension declared, or not).
func v2(method, name, params string, extension bool) (map[string]string, string) {
	caps := `{}`
	if extension {
		caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
		`,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	header := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		header["Mcp-Name"] = name
	}
	params = strings.TrimSuffix(params, "}")
	if params != "{" {
		params += ","
	}
	return header, request(1, method, params+meta+"}")
}

// TestTasksExtension: a 2026-07-28 client that declares the tasks
// extension gets a task for a call that waits for an approver (a question
// it is asked in the call itself); tasks/get carries what the task asks of
// it, tasks/update answers, and the result comes inline once it ends. A
// client that declares nothing never gets a task, and is refused the
// extension's methods with -32021.
func TestTasksExtension(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true, keys: true})
	hd, body := v2("server/discover", "", `{}`, true)
	if a := h.rpcCall(fullKey, hd, body, nil); !strings.Contains(string(a.last(t).Result), `"io.modelcontextprotocol/tasks":{}`) {
		t.Errorf("server/discover: %d %s %+v", a.status, a.last(t).Result, a.last(t).Error)
	}
	hd, body = v2("tools/call", "guarded", `{"name":"guarded","arguments":{}}`, false)
	if r := h.rpcCall(fullKey, hd, body, nil).last(t).Result; strings.Contains(string(r), `"resultType":"task"`) || !strings.Contains(string(r), "approval") {
		t.Errorf("without the extension, a call is no task: %s", r)
	}

	hd, body = v2("tools/call", "guarded_ask", `{"name":"guarded_ask","arguments":{}}`, true)
	var created taskV2View
	decodeInto(t, h.rpcCall(fullKey, hd, body, nil).last(t).Result, &created)
	id := created.TaskID
	if created.ResultType != "task" || created.Status != "working" || created.TTLMs == nil || !strings.Contains(created.StatusMessage, "/console/#approvals") {
		t.Fatalf("the task created: %+v", created)
	}
	get := func() taskV2View {
		hd, body := v2("tasks/get", id, `{"taskId":"`+id+`"}`, true)
		var got taskV2View
		decodeInto(t, h.rpcCall(fullKey, hd, body, nil).last(t).Result, &got)
		return got
	}
	hd, body = v2("tasks/get", id, `{"taskId":"`+id+`"}`, false)
	if e := h.rpcCall(fullKey, hd, body, nil).last(t).Error; e == nil || e.Code != -32021 || !strings.Contains(string(e.Data), "io.modelcontextprotocol/tasks") {
		t.Errorf("tasks/get without the extension: %+v", e)
	}
	if code, b := h.postJSON("/approvals/"+id, approverKey, `{"approve":true}`); code != 200 {
		t.Fatalf("approve: %d %s", code, b)
	}
	h.waitTask(fullKey, id, "input_required") // the same execution, read as a 2025-11-25 task
	asked := get()
	var requests map[string]struct {
		Method string
		Params struct{ Message string }
	}
	decodeInto(t, asked.InputRequests, &requests)
	var key string
	for k, r := range requests {
		if r.Method != "elicitation/create" || r.Params.Message != "Which release?" {
			t.Errorf("the question: %s %+v", k, r)
		}
		key = k
	}
	hd, body = v2("tasks/update", id, `{"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"answer":"v2"}}}}`, true)
	if r := h.rpcCall(fullKey, hd, body, nil).last(t); r.Error != nil || !strings.Contains(string(r.Result), `"resultType":"complete"`) {
		t.Fatalf("tasks/update: %s %+v", r.Result, r.Error)
	}
	h.waitTask(fullKey, id, "completed")
	if done := get(); done.Status != "completed" || !strings.Contains(string(done.Result), `"structuredContent":{"answer":"v2"}`) {
		t.Errorf("the result inline: %+v", done)
	}
}

// taskV2View is what the tests read of the extension's task.
type taskV2View struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	TTLMs         *int64          `json:"ttlMs"`
	InputRequests json.RawMessage `json:"inputRequests"`
	Result        json.RawMessage `json:"result"`
}

// TestToolsetTasks: a toolset's server serves tasks as /mcp does, within
// the toolset: a tool outside it is unknown there, as a plain call's is.
func TestToolsetTasks(t *testing.T) {
	sets, err := registry.NewToolsets([]registry.Toolset{{Name: "people", Tools: []string{"guarded"}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{store: true, toolsets: sets})
	a := h.rpcCallAt("/mcp/people", "", v1125, request(1, "tools/call", `{"name":"guarded","arguments":{},"task":{}}`), nil)
	var created struct{ Task taskView }
	decodeInto(t, a.last(t).Result, &created)
	if created.Task.TaskID == "" {
		t.Fatalf("a task in the toolset: %s %+v", a.last(t).Result, a.last(t).Error)
	}
	h.waitTask("", created.Task.TaskID, "input_required")
	e := h.rpcCallAt("/mcp/people", "", v1125, request(2, "tools/call", `{"name":"request_user_input","arguments":{"prompt":"?"},"task":{}}`), nil).last(t).Error
	if e == nil || e.Code != -32602 || !strings.Contains(e.Message, "unknown tool") {
		t.Errorf("a task of a tool outside the toolset: %+v", e)
	}
}
