package notify

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/netguard"
)

// hook is a webhook receiver on loopback that keeps what it was sent.
type hook struct {
	mu     sync.Mutex
	bodies []string
	types  []string
	got    chan struct{}
	url    string
}

func newHook(t *testing.T, status int) *hook {
	t.Helper()
	h := &hook{got: make(chan struct{}, 16)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies, h.types = append(h.bodies, string(b)), append(h.types, r.Method+" "+r.Header.Get("Content-Type"))
		h.mu.Unlock()
		w.WriteHeader(status)
		h.got <- struct{}{}
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hooks/T000/B000"
	return h
}

func (h *hook) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

func webhook(t *testing.T, url string, p netguard.Policy) (*Webhook, *observer.ObservedLogs) {
	t.Helper()
	g, err := netguard.New(p)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	w, err := NewWebhook(WebhookOptions{URL: url, Guard: g, Logger: zap.New(core), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, logs
}

var waiting = executions.PendingApproval{ID: "01a2141e0b6959ba13093696", Tool: "deploy", Caller: "agent",
	Request: json.RawMessage(`{"tool":"deploy","arguments":{"target":"prod-secret-host"}}`),
	Since:   time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)}

// TestWebhookDelivers: one Slack-compatible JSON POST per approval, naming
// the tool, caller, execution and expiry, and never the arguments.
func TestWebhookDelivers(t *testing.T) {
	h := newHook(t, 200)
	w, logs := webhook(t, h.url, netguard.Policy{Allow: []string{"127.0.0.1"}, AllowHTTP: true})
	// A second approval marks the end of the first's messages: they go
	// out one at a time, in order, so the second message must be its.
	next := waiting
	next.ID = "01a2141e0b6959ba13093697"
	w.Notify(waiting)
	w.Notify(next)
	for range 2 {
		select {
		case <-h.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("not delivered; logs: %v", logs.All())
		}
	}
	got := h.received()
	if len(got) != 2 || h.types[0] != "POST application/json" || !strings.Contains(got[1], next.ID) {
		t.Fatalf("delivered %d messages (%v) for two approvals: %v", len(got), h.types, got)
	}
	var msg map[string]string
	if err := json.Unmarshal([]byte(got[0]), &msg); err != nil || len(msg) != 1 {
		t.Fatalf("not {\"text\": ...}: %s", got[0])
	}
	for _, want := range []string{"deploy", "agent", waiting.ID, "2026-11-25T11:00:00Z", "/console/#approvals"} {
		if !strings.Contains(msg["text"], want) {
			t.Errorf("the message lacks %q: %s", want, msg["text"])
		}
	}
	if strings.Contains(got[0], "prod-secret-host") {
		t.Errorf("the message carries the arguments: %s", got[0])
	}
}

// TestWebhookGuarded: the webhook dials through the outbound guard, so a
// URL on loopback (or any internal address) is refused unless the policy
// allows it, and the refusal is logged; a failing webhook is logged too.
func TestWebhookGuarded(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy netguard.Policy
		status int
		sent   int
		log    string
	}{
		{"loopback not allowed", netguard.Policy{AllowHTTP: true}, 200, 0, "refused by toold's outbound guard (http://127.0.0.1:"},
		{"plain http not allowed", netguard.Policy{Allow: []string{"127.0.0.1"}}, 200, 0, "plain http is not allowed"},
		{"the webhook fails", netguard.Policy{Allow: []string{"127.0.0.1"}, AllowHTTP: true}, 500, 1, "the webhook answered 500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHook(t, c.status)
			w, logs := webhook(t, h.url, c.policy)
			w.Notify(waiting)
			deadline := time.Now().Add(10 * time.Second)
			for logs.FilterMessage("approval webhook: not delivered").Len() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no failure logged: %v", logs.All())
				}
				time.Sleep(10 * time.Millisecond)
			}
			entry := logs.FilterMessage("approval webhook: not delivered").All()[0]
			if err := entry.ContextMap()["error"]; !strings.Contains(err.(string), c.log) || strings.Contains(err.(string), "T000/B000") {
				t.Errorf("logged %v, want %q and not the URL's path (its secret)", err, c.log)
			}
			if n := len(h.received()); n != c.sent {
				t.Errorf("%d requests reached the webhook, want %d", n, c.sent)
			}
		})
	}
}

// TestWebhookNeverBlocks: a webhook that hangs delays no caller of
// Notify, a full queue drops (and logs), and Close returns.
func TestWebhookNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	w, logs := webhook(t, srv.URL, netguard.Policy{Allow: []string{"127.0.0.1"}, AllowHTTP: true})
	start := time.Now()
	for i := 0; i < webhookQueue+10; i++ {
		w.Notify(waiting)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Notify blocked for %v", d)
	}
	if logs.FilterMessage("approval webhook: the queue is full; this approval is not announced").Len() == 0 {
		t.Error("a full queue dropped nothing, or silently")
	}
	done := make(chan struct{})
	go func() { w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on a webhook that hangs")
	}
}
