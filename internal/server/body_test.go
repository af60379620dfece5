package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/tools"
)

// stalled is a client that sent a request's headers and the first bytes
// of a body it announced larger, and then stopped: what a slow or hostile
// uploader looks like to the server.
type stalled struct {
	c net.Conn
	r *bufio.Reader
}

func stall(t *testing.T, base, path string, announced int, sent string, header ...string) *stalled {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, u.Host, announced)
	for _, h := range header {
		head += h + "\r\n"
	}
	if _, err := c.Write([]byte(head + "\r\n" + sent)); err != nil {
		t.Fatal(err)
	}
	return &stalled{c: c, r: bufio.NewReader(c)}
}

// answer waits up to d for the response's status line and headers.
func (s *stalled) answer(t *testing.T, d time.Duration) (*http.Response, time.Duration) {
	t.Helper()
	start := time.Now()
	s.c.SetReadDeadline(start.Add(d))
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		return nil, time.Since(start)
	}
	resp.Body.Close()
	return resp, time.Since(start)
}

func gateLimits(inFlight, queue int) map[string]registry.Override {
	return map[string]registry.Override{"gate": {Limits: tools.Limits{MaxInFlight: inFlight, MaxQueue: queue,
		Timeout: 20 * time.Second, Max: time.Second, Target: 100 * time.Millisecond}}}
}

// TestLargeBodyWaitsForItsSlot: a call with a large body to a tool at
// capacity is refused at once, without toold waiting for (or holding) its
// body; one that queues has its body read only once it has a slot.
func TestLargeBodyWaitsForItsSlot(t *testing.T) {
	g := newGate()
	reg := prometheus.NewRegistry()
	h := newHarness(t, harnessOpts{tools: []tools.Tool{g}, metrics: reg, limits: gateLimits(1, 1)})
	go h.exec("gate", `{}`, nil) // holds the one slot
	<-g.entered

	queued := stall(t, h.url, "/tools/gate/execute", 512<<10, `{"pass":true, "pad":"`)
	waitUntil(t, "the large call queues", func() bool { return gauge(t, reg, "toold_tool_queue_depth") == 1 })
	refused := stall(t, h.url, "/tools/gate/execute", 512<<10, `{"pass":true, "pad":"`)
	resp, took := refused.answer(t, 5*time.Second)
	if resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a large body to a full tool: %v after %v, want 429 without reading the body", resp, took)
	}
	if got := bodyBytesHeld(t, reg); got > 1<<10 { // the running call's {} is held
		t.Errorf("%v body bytes held while the only large call waits in the queue", got)
	}

	// Its turn comes: now its body is read, and it runs.
	pad := strings.Repeat("x", 512<<10-len(`{"pass":true, "pad":"`)-2) + `"}`
	if _, err := queued.c.Write([]byte(pad)); err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{}
	if resp, took := queued.answer(t, 10*time.Second); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("the queued call, once admitted: %v after %v", resp, took)
	}
}

func bodyBytesHeld(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "toold_body_bytes_held" {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatal("toold_body_bytes_held is not exported")
	return 0
}

// TestStalledUploadIsCut: a body that stops arriving is refused at the
// body timeout with 408 (the connection closed), and its call's slot goes
// to the next caller.
func TestStalledUploadIsCut(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOpts{tools: []tools.Tool{g}, limits: gateLimits(1, 5),
		bodies: &reqbody.Options{Timeout: 300 * time.Millisecond}})
	s := stall(t, h.url, "/tools/gate/execute", 256<<10, `{"pad":"`)
	resp, took := s.answer(t, 10*time.Second)
	if resp == nil || resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("a stalled upload: %v after %v, want 408 and Connection: close", resp, took)
	}
	if r := h.exec("gate", `{"pass":true}`, nil); r.status != 200 {
		t.Fatalf("the slot was not freed: %d %s", r.status, r.body)
	}
}

// TestBodyBudget: the bodies held at once share one budget; past it a
// request is refused at once with 503 and Retry-After (on every route that
// reads a body), and the budget comes back when the bodies go.
func TestBodyBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, harnessOpts{metrics: reg, bodies: &reqbody.Options{MaxBytes: 256 << 10, Budget: 512 << 10, Timeout: 10 * time.Second}})
	a := stall(t, h.url, "/batch", 256<<10, `{"calls":[`)
	b := stall(t, h.url, "/tools/echo/execute", 256<<10, `{"message":"`)
	waitUntil(t, "two bodies hold the budget", func() bool { return bodyBytesHeld(t, reg) == 512<<10 })
	for _, path := range []string{"/tools/echo/execute", "/batch", "/executions"} {
		c := stall(t, h.url, path, 1<<10, `{`)
		resp, took := c.answer(t, 5*time.Second)
		if resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s past the budget: %v after %v, want 503 with Retry-After", path, resp, took)
		}
	}
	a.c.Close()
	b.c.Close()
	waitUntil(t, "the budget comes back", func() bool { return bodyBytesHeld(t, reg) == 0 })
	if r := h.exec("echo", `{"message":"x"}`, nil); r.status != 200 {
		t.Fatalf("after the budget came back: %d %s", r.status, r.body)
	}
}
