package mcpserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// asker is a client's user and model as tests play them: it records what
// it was asked and answers as told.
type asker struct {
	mu      sync.Mutex
	asked   []string
	answer  map[string]any // the form's content; nil declines
	sampled string
}

func (a *asker) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.asked = append(a.asked, r.Params.Message)
			if a.answer == nil {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			content := a.answer
			if strings.HasPrefix(r.Params.Message, "Run the tool") {
				content = map[string]any{"confirm": true}
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			if tc, ok := r.Params.Messages[0].Content.(*mcp.TextContent); ok {
				a.sampled = tc.Text
			}
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "all 42 pass"}}, nil
		},
	}
}

func (a *asker) questions() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.asked, " | ")
}

// TestOlderClientsAreAsked: a client before 2026-07-28 that declared
// elicitation (and sampling) is asked by toold itself — over stdio, and on
// an HTTP call whose answer becomes an event stream — for a tool's
// question, a subtask, and a confirmation token, and the call answers
// with the tool's result. A declined question ends the call; an approval,
// which the caller's user cannot give, is described with what finishes it.
func TestOlderClientsAreAsked(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true})
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(transport+" "+version, func(t *testing.T) {
				yes := &asker{answer: map[string]any{"answer": "blue"}}
				no := &asker{}
				connect := func(a *asker) *mcp.ClientSession {
					if transport == "stdio" {
						return h.stdioAt(version, a.options())
					}
					return h.client(version, "", a.options())
				}
				cs, declining := connect(yes), connect(no)

				res, err := callTool(t, cs, "request_user_input", map[string]any{"prompt": "Which colour?", "choices": []string{"red", "blue"}}, nil)
				if err != nil || res.IsError || structured(t, res)["answer"] != "blue" || !strings.Contains(yes.questions(), "Which colour?") {
					t.Fatalf("a question: %v %s (asked %q)", err, text(res), yes.questions())
				}
				res, err = callTool(t, cs, "delegate", map[string]any{"description": "Run the tests"}, nil)
				if err != nil || res.IsError || structured(t, res)["result"] != "all 42 pass" || !strings.Contains(yes.sampled, "Run the tests") {
					t.Fatalf("a subtask: %v %s (sampled %q)", err, text(res), yes.sampled)
				}
				before := dangerCount()
				res, err = callTool(t, cs, "danger", map[string]any{"what": "x"}, nil)
				if err != nil || res.IsError || dangerCount() != before+1 || !strings.Contains(yes.questions(), "Run the tool danger?") {
					t.Fatalf("a confirmation: %v %s (asked %q)", err, text(res), yes.questions())
				}
				res, err = callTool(t, cs, "guarded", map[string]any{}, nil)
				if err != nil || !res.IsError || !strings.Contains(text(res), "/console/#approvals") || !strings.Contains(text(res), "repeat this exact call") {
					t.Fatalf("an approval: %v %s", err, text(res))
				}

				res, err = callTool(t, declining, "request_user_input", map[string]any{"prompt": "Proceed?"}, nil)
				if err != nil || !res.IsError || !strings.Contains(text(res), "cancelled") {
					t.Errorf("a declined question: %v %s", err, text(res))
				}
				before = dangerCount()
				res, err = callTool(t, declining, "danger", map[string]any{"what": "x"}, nil)
				if err != nil || !res.IsError || !strings.Contains(text(res), "declined") || dangerCount() != before {
					t.Errorf("a declined confirmation: %v %s", err, text(res))
				}
			})
		}
	}
}

// TestClientsThatCannotBeAskedAreTold: a client that declared nothing
// gets the text of what finishes the call — never a header /mcp ignores.
func TestClientsThatCannotBeAskedAreTold(t *testing.T) {
	h := newHarness(t, harnessOpts{store: true})
	for _, transport := range []string{"stdio", "http"} {
		var cs *mcp.ClientSession
		if transport == "stdio" {
			cs = h.stdioAt("2025-11-25", nil)
		} else {
			cs = h.client("2025-11-25", "", nil)
		}
		res, err := callTool(t, cs, "danger", map[string]any{"what": "x"}, nil)
		if err != nil || !res.IsError || !strings.Contains(text(res), `"toold/confirm_token"`) || !strings.Contains(text(res), "POST /tools/danger/execute") ||
			strings.Contains(text(res), "with the header Toold-Confirm:") {
			t.Errorf("%s: the confirmation text: %v %s", transport, err, text(res))
		}
		res, err = callTool(t, cs, "request_user_input", map[string]any{"prompt": "Which?"}, nil)
		if err != nil || !res.IsError || !strings.Contains(text(res), "/console/#questions") || !strings.Contains(text(res), "GET /executions/") {
			t.Errorf("%s: a question's text: %v %s", transport, err, text(res))
		}
	}
}

func dangerCount() int {
	dangerRuns.Lock()
	defer dangerRuns.Unlock()
	return dangerRuns.n
}
