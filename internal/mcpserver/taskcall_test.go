package mcpserver_test

import (
	"strings"
	"testing"
)

// TestTaskCallReadStrictly (issue 38, item 7): a task-augmented
// tools/call is read once, strictly: a member written twice anywhere in
// the message — the tool's name, the task, the params — or text that is
// not UTF-8 is refused, naming the problem, and no task is created.
// (encoding/json, which read it three times before, keeps the last of two
// names: a check could see one tool and the task run another.) Over HTTP
// and over stdio alike.
func TestTaskCallReadStrictly(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true, keys: true})
	cases := []struct{ name, body string }{
		{"the tool named twice", request(1, "tools/call", `{"name":"guarded","arguments":{},"task":{},"name":"request_user_input"}`)},
		{"the task twice", request(2, "tools/call", `{"name":"guarded","arguments":{},"task":{},"task":{"ttl":1}}`)},
		{"params twice", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"guarded","arguments":{},"task":{}},` +
			`"params":{"name":"request_user_input","arguments":{"prompt":"p"},"task":{}}}`},
		{"a member twice in _meta", request(4, "tools/call", `{"name":"guarded","arguments":{},"task":{},"_meta":{"a":1,"a":2}}`)},
		{"a name not UTF-8", request(5, "tools/call", "{\"name\":\"guarded\xff\",\"arguments\":{},\"task\":{}}")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := h.rpcCall(fullKey, v1125, tc.body, nil).last(t).Error
			if e == nil || e.Code != -32602 || !strings.Contains(e.Message, "not acceptable JSON") {
				t.Errorf("got %+v, want -32602 saying the call is not acceptable JSON", e)
			}
		})
	}
	stdio := newHarness(t, harnessOpts{store: true})
	p := stdio.rawStdio()
	p.send(stdioInit)
	p.next()
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tc := range cases[:3] {
		p.send(tc.body)
		if m := p.next(); m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "not acceptable JSON") {
			t.Errorf("stdio, %s: %+v %s", tc.name, m.Error, m.Result)
		}
	}
	list := h.rpcCall(fullKey, v1125, request(9, "tasks/list", `{}`), nil).last(t)
	if list.Error != nil || !strings.Contains(string(list.Result), `"tasks":[]`) {
		t.Errorf("tasks after the refusals: %s %+v", list.Result, list.Error)
	}
	// The same call, each member once, is a task.
	ok := h.rpcCall(fullKey, v1125, request(10, "tools/call", `{"name":"guarded","arguments":{},"task":{}}`), nil).last(t)
	if ok.Error != nil || !strings.Contains(string(ok.Result), `"taskId"`) {
		t.Errorf("a well-formed task call: %s %+v", ok.Result, ok.Error)
	}
}
