package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOnlyTheAskedCallerAnswers (issue 38, item 12): toold asks a
// client's user a tool's question with a request of its own whose id
// names the execution ("toold/exec/<id>/<step>"). Another caller who
// knows the id posts an error answer to it; it is not taken — toold goes
// on waiting for the caller it asked, whose answer then finishes the call.
// (Before, the error answer made toold stop asking and answer the call
// as waiting, within a step of its follower.)
func TestOnlyTheAskedCallerAnswers(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true, keys: true})
	asked, release := make(chan struct{}, 1), make(chan struct{})
	opts := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "blue"}}, nil
	}}
	cs := h.client("2025-06-18", fullKey, opts)
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	t.Cleanup(answer) // before the client closes: a failed test leaves no handler waiting
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := callTool(t, cs, "request_user_input", map[string]any{"prompt": "Which colour?", "choices": []string{"red", "blue"}}, nil)
		done <- result{res, err}
	}()
	select {
	case <-asked:
	case r := <-done:
		t.Fatalf("the call ended before its question was asked: %v %v", r.err, r.res)
	case <-time.After(10 * time.Second):
		t.Fatal("toold never asked the question")
	}
	id := h.waitingExecution(t, fullKey)
	for step := range 4 { // whichever step it waits at
		body := `{"jsonrpc":"2.0","id":"toold/exec/` + id + `/` + strconv.Itoa(step) + `","error":{"code":-1,"message":"declined"}}`
		if status, _, b := h.post(body, map[string]string{"Authorization": "Bearer " + echoKey, "Mcp-Protocol-Version": "2025-06-18"}); status != http.StatusAccepted {
			t.Logf("%s", b)
			t.Fatalf("the other caller's answer: %d", status)
		}
	}
	// toold's follower reads answers once a step (a second): give it two.
	// Nothing is to happen meanwhile, so the wait is the thing under test.
	select {
	case r := <-done:
		t.Fatalf("the other caller's error answer ended the call: %v %s", r.err, text(r.res))
	case <-time.After(2500 * time.Millisecond):
	}
	answer()
	r := <-done
	if r.err != nil || r.res.IsError || structured(t, r.res)["answer"] != "blue" {
		t.Fatalf("the asked caller's answer: %v %s", r.err, text(r.res))
	}
}

// waitingExecution is the id of the key's execution that waits.
func (h *harness) waitingExecution(t *testing.T, key string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", h.url+"/executions?status=waiting", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	id := regexp.MustCompile(`"execution_id":"([0-9a-f]{24})"`).FindSubmatch(b)
	if id == nil {
		t.Fatalf("no waiting execution: %s", b)
	}
	return string(id[1])
}
