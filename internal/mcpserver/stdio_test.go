package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/mcpserver"
)

// TestStdioAnswersBadLines: over stdio, a line that is not JSON is
// answered -32700 and one that is JSON but no message -32600 (with its id
// when it has one), as JSON-RPC says; the session goes on and answers the
// next good line.
func TestStdioAnswersBadLines(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.mcp.ServeStdio(ctx, sr, sw) }()

	long := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", mcpserver.DefaultMaxBodyBytes) + `"}}`
	lines := []string{
		"not json at all",
		"",
		`{"id": 7, "hello": "world"}`,
		`[]`,
		`{"jsonrpc":"2.0","id":1,"method":`,
		long,
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
	}
	go func() {
		for _, l := range lines {
			if _, err := io.WriteString(cw, l+"\n"); err != nil {
				return
			}
		}
	}()
	want := []struct {
		id   string
		code int
	}{{"null", -32700}, {"7", -32600}, {"null", -32600}, {"null", -32700}, {"null", -32700}}
	sc := bufio.NewScanner(cr)
	sc.Buffer(nil, 1<<20)
	for i := 0; i <= len(want); i++ {
		if !sc.Scan() {
			t.Fatalf("answer %d: %v", i, sc.Err())
		}
		var got struct {
			ID     json.RawMessage
			Error  *struct{ Code int }
			Result json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("answer %d is not JSON: %s", i, sc.Bytes())
		}
		if i == len(want) {
			if string(got.ID) != "2" || got.Result == nil {
				t.Errorf("the good line after the bad ones: %s", sc.Bytes())
			}
			break
		}
		if got.Error == nil || got.Error.Code != want[i].code || string(got.ID) != want[i].id {
			t.Errorf("answer %d: %s, want code %d and id %s", i, sc.Bytes(), want[i].code, want[i].id)
		}
	}
	cw.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("ServeStdio did not return when stdin closed")
	}
}

// stdioPeer drives ServeStdio with raw lines, as a host (or a person with
// printf) would: send writes a line, next reads the next message.
type stdioPeer struct {
	t    *testing.T
	in   io.WriteCloser
	msgs chan json.RawMessage
	done chan error
	// tasks are the task ids answers named so far.
	tasks map[string]bool
}

func (h *harness) rawStdio() *stdioPeer {
	h.t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &stdioPeer{t: h.t, in: cw, msgs: make(chan json.RawMessage, 64), done: make(chan error, 1)}
	go func() { p.done <- h.mcp.ServeStdio(ctx, sr, sw); sw.Close() }()
	go func() {
		sc := bufio.NewScanner(cr)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			p.msgs <- append(json.RawMessage(nil), sc.Bytes()...)
		}
		close(p.msgs)
	}()
	h.t.Cleanup(func() { cw.Close(); cancel() })
	return p
}

func (p *stdioPeer) send(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.in, l+"\n"); err != nil {
			p.t.Fatal(err)
		}
	}
}

// next is the next message, or nil once the output ended.
func (p *stdioPeer) next() *rpcMessage {
	p.t.Helper()
	select {
	case raw, ok := <-p.msgs:
		if !ok {
			return nil
		}
		var m rpcMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			p.t.Fatalf("%s: %v", raw, err)
		}
		return &m
	case <-time.After(20 * time.Second):
		p.t.Fatal("no message from toold -stdio")
	}
	return nil
}

const stdioInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{"elicitation":{"form":{}},"sampling":{},"tasks":{"requests":{}}},"clientInfo":{"name":"printf","version":"1"}}}`

// TestStdioDrainsOnEOF: the host's input ends right after its requests —
// `printf '<initialize>\n<initialized>\n<tools/list>\n<tools/call>\n' |
// toold -stdio` — and every request is still answered before toold ends.
func TestStdioDrainsOnEOF(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for run := range 3 {
		p := h.rawStdio()
		p.send(stdioInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":200}}}`)
		p.in.Close()
		answered := map[string]bool{}
		for m := p.next(); m != nil; m = p.next() {
			if m.Result != nil {
				answered[string(m.ID)] = true
			}
		}
		if !answered["1"] || !answered["2"] || !answered["3"] {
			t.Errorf("run %d: answered %v, want 1, 2 and 3", run, answered)
		}
		if err := <-p.done; err != nil {
			t.Errorf("run %d: ServeStdio: %v", run, err)
		}
	}
}

// TestStdioTasks: over stdio a task is created, its changes are told
// (notifications/tasks/status), and tasks/result asks the client for what
// the task waits for — a question as an elicitation, a subtask as a
// sampling request — naming the task; the client's answer (a response on
// stdin) resumes it, and tasks/result answers the tool's result.
func TestStdioTasks(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true})
	p := h.rawStdio()
	p.send(stdioInit)
	if m := p.next(); !strings.Contains(string(m.Result), `"tasks":{`) {
		t.Fatalf("initialize: %s", m.Result)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, tc := range []struct{ call, asks, answer, want string }{
		{`{"name":"request_user_input","arguments":{"prompt":"Which branch?"},"task":{"ttl":60000}}`, "elicitation/create",
			`{"action":"accept","content":{"answer":"release"}}`, `"structuredContent":{"answer":"release"}`},
		{`{"name":"delegate","arguments":{"description":"Review the change"},"task":{}}`, "sampling/createMessage",
			`{"role":"assistant","model":"m","content":{"type":"text","text":"looks right"}}`, `"result":"looks right"`},
	} {
		id := strconv.Itoa(10 * (i + 1))
		p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + tc.call + `}`)
		if !p.taskAnswered(id, tc.asks, tc.answer, tc.want) {
			t.Fatalf("%s: the output ended before tasks/result answered", tc.asks)
		}
	}
}

// statusTask is the task a notifications/tasks/status names.
func statusTask(params json.RawMessage) string {
	var st struct{ TaskID string }
	_ = json.Unmarshal(params, &st)
	return st.TaskID
}

// taskAnswered follows the task that the tools/call with id creates: once
// it waits, it asks tasks/result, answers the question toold asks (of
// method asks) with answer, and checks the result holds want.
func (p *stdioPeer) taskAnswered(id, asks, answer, want string) bool {
	p.t.Helper()
	var task string
	waiting, asked := false, false
	for m := p.next(); m != nil; m = p.next() {
		switch {
		case string(m.ID) == id:
			var created struct{ Task struct{ TaskID string } }
			_ = json.Unmarshal(m.Result, &created)
			task = created.Task.TaskID
			if p.tasks == nil {
				p.tasks = map[string]bool{}
			}
			p.tasks[task] = true
		case m.Method == "notifications/tasks/status" && !p.tasks[statusTask(m.Params)]:
			p.t.Errorf("a task's status before the tools/call answer that names it: %s", m.Params)
		case m.Method == "notifications/tasks/status" && strings.Contains(string(m.Params), `"input_required"`) && !waiting:
			waiting = true
			p.send(`{"jsonrpc":"2.0","id":` + id + `1,"method":"tasks/result","params":{"taskId":"` + task + `"}}`)
		case m.Method == asks:
			asked = true
			if !strings.Contains(string(m.Params), `"io.modelcontextprotocol/related-task":{"taskId":"`+task+`"}`) {
				p.t.Errorf("the question names no task: %s", m.Params)
			}
			p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + answer + `}`)
		case string(m.ID) == id+"1":
			if !asked || !strings.Contains(string(m.Result), want) || !strings.Contains(string(m.Result), `"io.modelcontextprotocol/related-task"`) {
				p.t.Errorf("tasks/result: %s (asked: %v)", m.Result, asked)
			}
			return true
		}
	}
	return false
}
