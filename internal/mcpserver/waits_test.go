package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWaitsOverMCP: a tool that pauses is answered through MCP's own
// multi-round-trip requests where the client speaks 2026-07-28 and can
// answer — an input as an elicitation to its user, a subtask as a sampling
// request to its model — and the call's result is the tool's answer; an
// older client is told what the call waits for and where to resume it.
func TestWaitsOverMCP(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true})
	var asked, sampled string
	cs := h.client("2026-07-28", "", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = r.Params.Message
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "blue"}}, nil
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if tc, ok := r.Params.Messages[0].Content.(*mcp.TextContent); ok {
				sampled = tc.Text
			}
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "42 tests pass"}}, nil
		},
	})
	res, err := callTool(t, cs, "request_user_input", map[string]any{"prompt": "Which colour?", "choices": []string{"red", "blue"}}, nil)
	if err != nil || res.IsError || asked != "Which colour?" || structured(t, res)["answer"] != "blue" {
		t.Fatalf("an input over elicitation: %v %s (asked %q)", err, text(res), asked)
	}
	res, err = callTool(t, cs, "delegate", map[string]any{"description": "Run the tests", "inputs": map[string]any{"pkg": "fs"}}, nil)
	if err != nil || res.IsError || structured(t, res)["result"] != "42 tests pass" || !strings.Contains(sampled, "Run the tests") ||
		!strings.Contains(sampled, `"pkg":"fs"`) {
		t.Fatalf("a subtask over sampling: %v %s (sampled %q)", err, text(res), sampled)
	}
	// A fallback that asks: the client repeats the call it made, named as
	// it called it, and the fallback's answer is the result.
	res, err = callTool(t, cs, "ask_first", map[string]any{"prompt": "Which shape?"}, nil)
	if err != nil || res.IsError || asked != "Which shape?" || structured(t, res)["answer"] != "blue" {
		t.Fatalf("a fallback's input over elicitation: %v %s (asked %q)", err, text(res), asked)
	}
	// An approval cannot be asked of the caller's user: it is described.
	res, err = callTool(t, cs, "guarded", map[string]any{}, nil)
	if err != nil || !res.IsError || !strings.Contains(text(res), "approval") {
		t.Fatalf("an approval over MCP: %v %s", err, text(res))
	}
	// A user who declines ends the call.
	decline := h.client("2026-07-28", "", &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
	res, err = callTool(t, decline, "request_user_input", map[string]any{"prompt": "Proceed?"}, nil)
	if err != nil || !res.IsError || !strings.Contains(text(res), "declined") {
		t.Fatalf("a declined input: %v %s", err, text(res))
	}

	old := h.client("2025-06-18", "", nil)
	res, err = callTool(t, old, "request_user_input", map[string]any{"prompt": "Which colour?"}, nil)
	w, _ := res.Meta["toold/waiting"].(map[string]any)
	if err != nil || !res.IsError || w == nil || w["for"] != "input" || !strings.Contains(text(res), "POST /executions/") {
		t.Fatalf("an older client is told where to resume: %v %s %v", err, text(res), res.Meta)
	}
	resume, _ := w["resume"].(string)
	req, _ := http.NewRequest("POST", h.url+resume, strings.NewReader(`{"answer":"green"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "wait=10")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var env struct {
		Status string
		Data   json.RawMessage
	}
	_ = json.Unmarshal(body, &env)
	if env.Status != "success" || string(env.Data) != `{"answer":"green"}` {
		t.Errorf("resumed over REST: %d %s", resp.StatusCode, body)
	}
}

// TestWaitsWithoutStore: where no store can keep a wait, the call is
// refused clearly instead of hanging.
func TestWaitsWithoutStore(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	cs := h.client("2026-07-28", "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_user_input", Arguments: map[string]any{"prompt": "?"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "state store") {
		t.Fatalf("%v %s", err, text(res))
	}
}

// TestApprovalJoin: an older client cannot follow an execution, so it is
// told to repeat its call once a person approved it. A repeat of the same
// call (tool and arguments) joins the execution that waits instead of
// parking another; once approved, the repeat answers the tool's result,
// once; a call with other arguments is a call of its own.
func TestApprovalJoin(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true, keys: true})
	cs := h.client("2025-06-18", fullKey, nil)
	waiting := func(args map[string]any) string {
		t.Helper()
		res, err := callTool(t, cs, "guarded", args, nil)
		w, _ := res.Meta["toold/waiting"].(map[string]any)
		if err != nil || !res.IsError || w == nil || w["for"] != "approval" {
			t.Fatalf("a call waiting for approval: %v %s", err, text(res))
		}
		return w["execution_id"].(string)
	}
	first := waiting(map[string]any{"n": 1})
	if again := waiting(map[string]any{"n": 1}); again != first {
		t.Errorf("the repeat parked %s instead of joining %s", again, first)
	}
	if other := waiting(map[string]any{"n": 2}); other == first {
		t.Errorf("a call with other arguments joined %s", first)
	}
	if code, body := h.postJSON("/approvals/"+first, approverKey, `{"approve":true}`); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	res, err := callTool(t, cs, "guarded", map[string]any{"n": 1}, nil)
	if err != nil || res.IsError || structured(t, res)["ran"] != true {
		t.Fatalf("the repeat after the approval: %v %s", err, text(res))
	}
	if next := waiting(map[string]any{"n": 1}); next == first {
		t.Errorf("the outcome was handed over twice: %s", next)
	}
}
