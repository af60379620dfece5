package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// gateTool holds every call until the test lets one go, and counts how many
// run at once.
type gateTool struct {
	entered chan struct{}
	release chan struct{}
	running *atomic.Int64
	peak    *atomic.Int64
}

func newGate() gateTool {
	return gateTool{entered: make(chan struct{}, 2000), release: make(chan struct{}), running: &atomic.Int64{}, peak: &atomic.Int64{}}
}

func (gateTool) Spec() tools.Spec {
	return tools.Spec{Name: "gate", Description: "Waits for the test.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"pass":{"type":"boolean"}}}`)}
}

func (g gateTool) Execute(ctx context.Context, c *tools.Call) (any, error) {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	g.entered <- struct{}{}
	if strings.Contains(string(c.Args), `"pass":true`) {
		time.Sleep(time.Millisecond)
		return "passed", nil
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return "released", nil
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return toolGauge(t, reg, name, "gate")
}

// toolGauge is the sample of the gauge name for tool, -1 when none.
func toolGauge(t *testing.T, reg *prometheus.Registry, name, tool string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == "tool" && l.GetValue() == tool {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	return -1
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBulkheadOverHTTP drives the real server with concurrent clients: N
// run, M wait, call N+M+1 is refused at once with Retry-After, a cancelled
// waiter leaves the queue at once, and a freed slot admits the next.
func TestBulkheadOverHTTP(t *testing.T) {
	const n, m = 2, 3
	g := newGate()
	reg := prometheus.NewRegistry()
	queue := m
	h := newHarness(t, harnessOpts{tools: []tools.Tool{g}, metrics: reg, limits: map[string]registry.Override{
		"gate": {Limits: tools.Limits{MaxInFlight: n, MaxQueue: queue, Timeout: 4 * time.Second, Max: time.Second, Target: 100 * time.Millisecond}}}})
	type answer struct {
		status int
		err    error
	}
	answers := make(chan answer, 10)
	call := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/tools/gate/execute", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.http.Do(req)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		resp.Body.Close()
		answers <- answer{status: resp.StatusCode}
	}
	for range n {
		go call(context.Background())
	}
	for range n {
		<-g.entered
	}
	cancelLast := func() {}
	for i := range m {
		ctx, cancel := context.WithCancel(context.Background())
		if i == m-1 {
			cancelLast = cancel
		} else {
			defer cancel()
		}
		go call(ctx)
		waitUntil(t, "the queue holds "+strconv.Itoa(i+1), func() bool { return gauge(t, reg, "toold_tool_queue_depth") == float64(i+1) })
	}
	if got := g.running.Load(); got != n {
		t.Fatalf("%d running, want %d", got, n)
	}
	start := time.Now()
	r := h.exec("gate", `{}`, nil)
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.env.Error.RetryAfterMS <= 0 || r.env.Error.Code != "queue_full" {
		t.Fatalf("call N+M+1: %d %v %s", r.status, r.header, r.body)
	}
	// Nothing frees a slot before the deadline (4 s): an answer within a
	// second was a refusal, not a wait. How fast refusals are is measured
	// by benchmarks, not here, on a machine shared with the race detector.
	if d := time.Since(start); d > time.Second {
		t.Errorf("call N+M+1 took %v to refuse", d)
	}
	cancelLast()
	start = time.Now()
	waitUntil(t, "the cancelled waiter leaves", func() bool { return gauge(t, reg, "toold_tool_queue_depth") == m-1 })
	if d := time.Since(start); d > time.Second {
		t.Errorf("the cancelled waiter left after %v", d)
	}
	if a := <-answers; a.err == nil {
		t.Errorf("the cancelled caller got an answer: %+v", a)
	}
	g.release <- struct{}{} // one finishes...
	select {
	case <-g.entered: // ...and the oldest waiter is admitted
	case <-time.After(2 * time.Second):
		t.Fatal("a freed slot did not admit the next caller")
	}
	for range n + m - 2 {
		g.release <- struct{}{}
	}
	for range n + m - 1 {
		if a := <-answers; a.err != nil || a.status != 200 {
			t.Errorf("an admitted call: %+v", a)
		}
	}
	if got := g.peak.Load(); got > n {
		t.Errorf("peak in flight %d > %d", got, n)
	}
	if v := counterSum(t, reg, "toold_tool_rejections_total"); v < 2 { // the N+M+1 call and the cancelled waiter
		t.Errorf("rejections metric = %v", v)
	}
}

// counterSum adds up every series of a counter.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestBulkheadHoldsUnderLoad: 1,000 concurrent HTTP clients against a tool
// with 10 in flight and 100 queued; the tool never sees more than 10 at once
// and every client gets an envelope: 200 or 429, nothing lost.
func TestBulkheadHoldsUnderLoad(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOpts{tools: []tools.Tool{g}, limits: map[string]registry.Override{
		"gate": {Limits: tools.Limits{MaxInFlight: 10, MaxQueue: 100}}}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 1000}, Timeout: 30 * time.Second}
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Go(func() {
			resp, err := client.Post(h.url+"/tools/gate/execute", "application/json", strings.NewReader(`{"pass":true}`))
			if err != nil {
				other.Add(1)
				return
			}
			var env struct{ Status string }
			json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200 && env.Status == "success":
				ok.Add(1)
			case resp.StatusCode == 429 && env.Status == "rejected":
				refused.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	if p := g.peak.Load(); p > 10 {
		t.Errorf("peak in flight %d > 10", p)
	}
	if other.Load() != 0 || ok.Load()+refused.Load() != 1000 || ok.Load() < 110 {
		t.Errorf("ok %d, refused %d, other %d", ok.Load(), refused.Load(), other.Load())
	}
	t.Logf("ok %d, refused %d, peak in flight %d", ok.Load(), refused.Load(), g.peak.Load())
}
