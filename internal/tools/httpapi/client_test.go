package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClientUnlisted: a Client made with Set.Client is no listed tool, yet
// calls its API as a listed one does — through the guard (refused without
// an allow entry), retried when declared read-only, counted in the metrics
// and its Tally under its name, and sharing the host's breaker with the
// listed tool calling the same host.
func TestClientUnlisted(t *testing.T) {
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
	cl, err := s.Client(chat)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tools()) != 1 {
		t.Errorf("Client listed a tool: %d tools", len(s.Tools()))
	}
	run := func(args map[string]any) (any, error, *Tally) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var n Tally
		v, err := cl.Do(ctx, args, &n)
		return v, err, &n
	}
	v, err, n := run(map[string]any{"q": "why?"})
	if err != nil || string(v.(json.RawMessage)) != `{"n":1}` || n.Attempts != 1 || n.Waited != 0 {
		t.Fatalf("%v %v after %+v", v, err, n)
	}
	if got := u.last(t); got.Method != "POST" || got.Body != `{"q":"why?"}` {
		t.Errorf("the API got %s %s", got.Method, got.Body)
	}
	// Read-only: a POST is retried after a 503.
	u.set(sequence(status(503, "down"), ok(`{"n":2}`)))
	if _, err, n := run(map[string]any{"q": "again"}); err != nil || n.Attempts != 2 || n.Waited <= 0 {
		t.Errorf("retry: %v after %+v", err, n)
	}
	if m := scrape(t, reg); !strings.Contains(m, `toold_upstream_attempts_total{host="`+strings.TrimPrefix(u.URL, "http://")+`",outcome="5xx",tool="consult.local"} 1`) {
		t.Errorf("metrics lack the Client's attempts:\n%s", m)
	}
	// The host's breaker is shared: the Client's failures open it
	// for the listed tool too.
	u.set(status(500, "broken"))
	for range 2 {
		run(map[string]any{"q": "x"})
	}
	_, err, _ = call(t, s, "listed", `{}`, 5*time.Second)
	if te := errorOf(t, err); te.Code != "circuit_open" {
		t.Errorf("the listed tool after the declared one's failures: %v", err)
	}

	// Without an allow entry the guard refuses the loopback API at once.
	bad := chat
	bad.Name, bad.Allow = "consult.unguarded", nil
	if _, err := s.Client(bad); err == nil || !strings.Contains(err.Error(), "consult.unguarded") {
		t.Errorf("a loopback URL without allow: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestHostsOfClients: a hosts entry for a host that only an unlisted
// Client calls (a consultation provider's model API) is accepted, and its
// rate holds for that Client; an entry nobody calls is refused by
// CheckHosts, once every kind of tool has made its clients.
func TestHostsOfClients(t *testing.T) {
	u := newUpstream(t, ok(`{}`))
	s, c, _ := build(t, u, strings.ReplaceAll(`
hosts:
  HOST: {rate: {per_second: 0.5, burst: 1}}
  unused.example.com: {rate: {per_second: 1}}
`, "HOST", hostOf(u)))
	if err := s.CheckHosts(); err == nil || !strings.Contains(err.Error(), "http.hosts."+hostOf(u)+": no HTTP tool calls this host") {
		t.Errorf("before Client: %v", err)
	}
	cl, err := s.Client(ToolConfig{Name: "consult.local", Description: "a model API",
		Request: RequestConfig{URL: u.URL + "/v1/models"}, Allow: []string{"127.0.0.1"}, AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckHosts()
	if err == nil || strings.Contains(err.Error(), hostOf(u)+":") ||
		!strings.Contains(err.Error(), "http.hosts.unused.example.com: no HTTP tool calls this host (hosts: "+hostOf(u)+")") {
		t.Errorf("after Client: %v", err)
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.Do(ctx, map[string]any{}, &Tally{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := c.slept(); len(w) != 1 || w[0] < time.Second {
		t.Errorf("the host's rate did not hold for the Client: waits %v", w)
	}
}
