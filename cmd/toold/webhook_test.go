package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestApprovalWebhook: approvals.webhook_url is told once of each call
// that starts waiting for approval — a Slack-compatible {"text": ...}
// naming the tool, caller and execution, without the arguments — through
// the outbound guard, here allowed to reach the loopback receiver; a
// decision sends nothing more.
func TestApprovalWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []string
	hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hook.Listener = ln
	hook.Start()
	defer hook.Close()
	received := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			out := append([]string(nil), got...)
			mu.Unlock()
			if len(out) >= n || time.Now().After(deadline) {
				return out
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	extra := "approvals:\n  webhook_url: " + hook.URL + "/services/T0/B0/secret\n  webhook_allow: [127.0.0.1]\n  webhook_allow_http: true\n"
	if err := os.WriteFile(cfg, []byte(consoleConfig(extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", workspace(t))
	first := callWaiting(t, in, "deploy ghp_"+strings.Repeat("Zz09", 9))
	msgs := received(1)
	if len(msgs) != 1 {
		t.Fatalf("the webhook got %d messages for one approval: %v", len(msgs), msgs)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(msgs[0]), &m); err != nil || !strings.Contains(m["text"], "echo, called by agent, waits for approval") ||
		!strings.Contains(m["text"], first) || strings.Contains(msgs[0], "deploy") {
		t.Errorf("the message: %s", msgs[0])
	}
	if a := send(t, "POST", in.url+"/approvals/"+first, `{"approve":true}`, bearer(consoleApproverKey)...); a.status != 200 {
		t.Fatalf("approve: %d %s", a.status, a.body)
	}
	// The decision sent nothing: the next message is the next approval's
	// (the webhook's queue sends in order), and the third the third's.
	second := callWaiting(t, in, "again")
	third := callWaiting(t, in, "and again")
	if msgs = received(3); len(msgs) != 3 || !strings.Contains(msgs[1], second) || !strings.Contains(msgs[2], third) {
		t.Errorf("after a decision and two more approvals, the webhook got: %v", msgs)
	}
	if strings.Contains(in.stdout.String()+in.stderr.String(), "/services/T0/B0/secret") {
		t.Error("the webhook's secret URL is in the logs")
	}
}

// TestApprovalWebhookRefusedAtStart: a webhook URL the outbound guard
// would refuse whatever it resolves to is a configuration error, named at
// start, without the URL's secret path.
func TestApprovalWebhookRefusedAtStart(t *testing.T) {
	for _, c := range []struct{ name, approvals, says string }{
		{"plain http", "  webhook_url: http://hooks.example.com/services/T0/B0/secret\n", "plain http is not allowed"},
		{"credentials", "  webhook_url: https://user:pw@hooks.example.com/services/T0/B0/secret\n", "approvals.webhook_url"},
		{"not a URL", "  webhook_url: hooks\n", "approvals.webhook_url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "toold.yaml")
			if err := os.WriteFile(cfg, []byte(consoleConfig("approvals:\n"+c.approvals)), 0o644); err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			err := run(context.Background(), []string{"-config", cfg, "-listen", "127.0.0.1:0", "-admin-listen", "", "-state-dir", t.TempDir()},
				func(string) (string, bool) { return "", false }, strings.NewReader(""), io.Discard, &stderr)
			if err == nil || !strings.Contains(stderr.String(), c.says) || strings.Contains(stderr.String(), "B0/secret") {
				t.Errorf("err %v, stderr %q: want %q, without the secret", err, stderr.String(), c.says)
			}
		})
	}
}
