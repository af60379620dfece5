package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/tools"
)

// TestDeclareUnlisted: a tool made with Declare is not listed, yet calls
// its API as a listed one does — through the guard (refused without an
// allow entry), retried when declared read-only, counted in the metrics
// under its name, and sharing the host's breaker with the listed tool
// calling the same host.
func TestDeclareUnlisted(t *testing.T) {
	u := newUpstream(t, ok(`{"n":1}`))
	s, _, reg := build(t, u, `
breaker: {failures: 2, open_for: 1m}
tools:
  - name: listed
    description: A listed tool on the same host.
    request: {url: $API/listed}
    allow: [127.0.0.1]
    allow_http: true
`)
	chat := ToolConfig{Name: "consult.local", Description: "a model API",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
		Request:    RequestConfig{Method: http.MethodPost, URL: u.URL + "/v1/chat", Body: map[string]any{"q": "{q}"}},
		ReadOnly:   ptr(true), Allow: []string{"127.0.0.1"}, AllowHTTP: true}
	tl, err := s.Declare(chat)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tools()) != 1 {
		t.Errorf("Declare listed its tool: %d tools", len(s.Tools()))
	}
	run := func(args string) (any, error, *tools.Call) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c := tools.NewCall(json.RawMessage(args), "test", "tester", nil)
		v, err := tl.Execute(ctx, c)
		return v, err, c
	}
	v, err, _ := run(`{"q":"why?"}`)
	if err != nil || string(v.(json.RawMessage)) != `{"n":1}` {
		t.Fatalf("%v %v", v, err)
	}
	if got := u.last(t); got.Method != "POST" || got.Body != `{"q":"why?"}` {
		t.Errorf("the API got %s %s", got.Method, got.Body)
	}
	// Read-only: a POST is retried after a 503.
	u.set(sequence(status(503, "down"), ok(`{"n":2}`)))
	if _, err, c := run(`{"q":"again"}`); err != nil || c.Attempts() != 2 {
		t.Errorf("retry: %v after %d attempts", err, c.Attempts())
	}
	if m := scrape(t, reg); !strings.Contains(m, `toold_upstream_attempts_total{host="`+strings.TrimPrefix(u.URL, "http://")+`",outcome="5xx",tool="consult.local"} 1`) {
		t.Errorf("metrics lack the declared tool's attempts:\n%s", m)
	}
	// The host's breaker is shared: the declared tool's failures open it
	// for the listed tool too.
	u.set(status(500, "broken"))
	for range 2 {
		run(`{"q":"x"}`)
	}
	_, err, _ = call(t, s, "listed", `{}`, 5*time.Second)
	if te := errorOf(t, err); te.Code != "circuit_open" {
		t.Errorf("the listed tool after the declared one's failures: %v", err)
	}

	// Without an allow entry the guard refuses the loopback API at once.
	bad := chat
	bad.Name, bad.Allow = "consult.unguarded", nil
	if _, err := s.Declare(bad); err == nil || !strings.Contains(err.Error(), "consult.unguarded") {
		t.Errorf("a loopback URL without allow: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestHostsOfDeclaredTools: a hosts entry for a host that only a declared
// tool calls (a consultation provider's model API) is accepted, and its
// rate holds for that tool; an entry nobody calls is refused by
// CheckHosts, once every declarer has declared.
func TestHostsOfDeclaredTools(t *testing.T) {
	u := newUpstream(t, ok(`{}`))
	s, c, _ := build(t, u, strings.ReplaceAll(`
hosts:
  HOST: {rate: {per_second: 0.5, burst: 1}}
  unused.example.com: {rate: {per_second: 1}}
`, "HOST", hostOf(u)))
	if err := s.CheckHosts(); err == nil || !strings.Contains(err.Error(), "http.hosts."+hostOf(u)+": no HTTP tool calls this host") {
		t.Errorf("before Declare: %v", err)
	}
	tl, err := s.Declare(ToolConfig{Name: "consult.local", Description: "a model API",
		Request: RequestConfig{URL: u.URL + "/v1/models"}, Allow: []string{"127.0.0.1"}, AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckHosts()
	if err == nil || strings.Contains(err.Error(), hostOf(u)+":") ||
		!strings.Contains(err.Error(), "http.hosts.unused.example.com: no HTTP tool calls this host (hosts: "+hostOf(u)+")") {
		t.Errorf("after Declare: %v", err)
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := tl.Execute(ctx, tools.NewCall(json.RawMessage(`{}`), "test", "tester", nil))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := c.slept(); len(w) != 1 || w[0] < time.Second {
		t.Errorf("the host's rate did not hold for the declared tool: waits %v", w)
	}
}
