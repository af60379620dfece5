package limits

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

type spec tools.Spec

func (s spec) Spec() tools.Spec                                { return tools.Spec(s) }
func (spec) Execute(context.Context, *tools.Call) (any, error) { return nil, nil }

func entry(t testing.TB, n, m int, wait time.Duration) *registry.Entry {
	t.Helper()
	r, err := registry.New(registry.Options{}, spec{Name: "t", Description: "d", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`),
		Limits:     tools.Limits{MaxInFlight: n, MaxQueue: m, QueueWait: wait, Target: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("t")
	return e
}

// admitAsync starts an Admit and returns a channel with its outcome.
func admitAsync(l *Limiter, ctx context.Context, e *registry.Entry) chan result {
	c := make(chan result, 1)
	go func() {
		rel, err := l.Admit(ctx, e)
		c <- result{rel, err}
	}()
	return c
}

type result struct {
	release func()
	err     error
}

// TestExactlyNRunAndMWait runs on synctest's clock: each waiter is in the
// queue once every goroutine is blocked (synctest.Wait), the refusal of
// call N+M+1 takes no time at all (a wait would), and the second waiter
// is seen still waiting while the first runs — no sleep, no guess.
func TestExactlyNRunAndMWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Registerer: prometheus.NewRegistry()})
		e := entry(t, 2, 3, time.Minute)
		ctx := context.Background()
		var running []func()
		for range 2 {
			rel, err := l.Admit(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			running = append(running, rel)
		}
		var queued []chan result
		for i := range 3 {
			queued = append(queued, admitAsync(l, ctx, e))
			synctest.Wait()
			if v := testutil.ToFloat64(l.queued.WithLabelValues("t")); v != float64(i+1) {
				t.Fatalf("queue depth %v, want %d", v, i+1)
			}
		}
		start := time.Now()
		_, err := l.Admit(ctx, e)
		var te *tools.Error
		if !errors.As(err, &te) || string(te.Code) != ReasonQueueFull || te.RetryAfter <= 0 {
			t.Fatalf("call N+M+1: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("rejection took %v: it waited", d)
		}
		// FIFO: the oldest waiter gets the freed slot; the next still waits.
		running[0]()
		got := <-queued[0]
		if got.err != nil {
			t.Fatal(got.err)
		}
		synctest.Wait()
		select {
		case r := <-queued[1]:
			t.Fatalf("second waiter admitted out of turn: %v", r.err)
		default:
		}
		if v := testutil.ToFloat64(l.inFlight.WithLabelValues("t")); v != 2 {
			t.Errorf("in flight = %v, want 2", v)
		}
		got.release()
		running[1]()
		for _, q := range queued[1:] {
			r := <-q
			if r.err != nil {
				t.Fatal(r.err)
			}
			r.release()
		}
		if v := testutil.ToFloat64(l.inFlight.WithLabelValues("t")); v != 0 {
			t.Errorf("in flight after all released = %v", v)
		}
		if v := testutil.ToFloat64(l.rejected.WithLabelValues("t", ReasonQueueFull)); v != 1 {
			t.Errorf("queue_full rejections = %v", v)
		}
	})
}

func waitGauge(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name && mf.Metric[0].GetGauge().GetValue() == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %v", name, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCancelledWaiterLeavesAtOnce runs on synctest's clock: the waiter
// is queued once every goroutine is blocked (synctest.Wait), and it
// leaves on the cancel with no time passed at all — leaving on the queue
// wait (a minute) or a freed slot (held throughout) would take time.
func TestCancelledWaiterLeavesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{})
		e := entry(t, 1, 5, time.Minute)
		rel, _ := l.Admit(context.Background(), e)
		ctx, cancel := context.WithCancel(context.Background())
		c := admitAsync(l, ctx, e)
		synctest.Wait()
		if v := testutil.ToFloat64(l.queued.WithLabelValues("t")); v != 1 {
			t.Fatalf("queue depth = %v, want the waiter", v)
		}
		start := time.Now()
		cancel()
		r := <-c
		if !errors.Is(r.err, context.Canceled) || time.Since(start) != 0 {
			t.Fatalf("cancelled waiter: %v after %v", r.err, time.Since(start))
		}
		if v := testutil.ToFloat64(l.queued.WithLabelValues("t")); v != 0 {
			t.Errorf("queue depth after cancel = %v", v)
		}
		// It never runs: the next caller gets the slot when it frees.
		next := admitAsync(l, context.Background(), e)
		rel()
		if r := <-next; r.err != nil {
			t.Fatal(r.err)
		} else {
			r.release()
		}
	})
}

func TestQueueWaitBound(t *testing.T) {
	l := New(Options{})
	e := entry(t, 1, 5, 30*time.Millisecond)
	rel, _ := l.Admit(context.Background(), e)
	defer rel()
	_, err := l.Admit(context.Background(), e)
	var te *tools.Error
	if !errors.As(err, &te) || string(te.Code) != ReasonQueueTimeout {
		t.Fatalf("got %v", err)
	}
}

func TestGlobalCap(t *testing.T) {
	l := New(Options{GlobalCap: 2})
	a, b := entry(t, 5, 5, time.Minute), entry(t, 5, 5, time.Minute)
	r1, _ := l.Admit(context.Background(), a)
	r2, _ := l.Admit(context.Background(), b)
	_, err := l.Admit(context.Background(), a)
	var te *tools.Error
	if !errors.As(err, &te) || string(te.Code) != ReasonGlobalCap {
		t.Fatalf("got %v", err)
	}
	r1()
	r3, err := l.Admit(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	r2()
	r3()
}

func TestRetryAfterGrowsWithQueue(t *testing.T) {
	l := New(Options{})
	e := entry(t, 2, 10, time.Minute)
	b := l.bulkhead(e)
	b.service.observe(100 * time.Millisecond)
	if got := b.retryAfter(1); got != 100*time.Millisecond {
		t.Errorf("position 1: %v", got)
	}
	if got := b.retryAfter(11); got != 600*time.Millisecond {
		t.Errorf("position 11: %v, want 6 rounds of 100ms", got)
	}
}

// TestLimitHoldsUnderLoad: 1,000 goroutines against N=10, M=100; the
// in-flight count never exceeds N, and every caller is either admitted or
// refused, none lost.
func TestLimitHoldsUnderLoad(t *testing.T) {
	l := New(Options{})
	e := entry(t, 10, 100, 5*time.Second)
	var running, peak, admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Go(func() {
			rel, err := l.Admit(context.Background(), e)
			if err != nil {
				refused.Add(1)
				return
			}
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			admitted.Add(1)
			rel()
		})
	}
	wg.Wait()
	if peak.Load() > 10 {
		t.Errorf("peak in flight %d > 10", peak.Load())
	}
	if admitted.Load()+refused.Load() != 1000 || admitted.Load() < 110 {
		t.Errorf("admitted %d refused %d", admitted.Load(), refused.Load())
	}
	t.Logf("admitted %d, refused %d, peak %d", admitted.Load(), refused.Load(), peak.Load())
}

func TestMetricNamesPassLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := New(Options{Registerer: reg})
	l.Register(entry(t, 1, 1, time.Second))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

// sourced is a tool of an upstream server: its calls count against the
// server's cap too.
func sourced(t testing.TB, name, source string, n, m int) *registry.Entry {
	t.Helper()
	r, err := registry.New(registry.Options{}, spec{Name: name, Description: "d", Category: tools.MCP, Source: source,
		Parameters: json.RawMessage(`{"type":"object"}`),
		Limits:     tools.Limits{MaxInFlight: n, MaxQueue: m, QueueWait: time.Minute, Target: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup(name)
	return e
}

// TestServerCap: the tools of one server share its cap on top of their
// own bulkheads; a call beyond it is refused at once with a Retry-After
// estimate and counted, and gives its tool's slot back. Other servers'
// tools are not affected.
func TestServerCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := New(Options{Registerer: reg, ServerCaps: map[string]int{"s": 2, "other": 5}})
	a, b, c := sourced(t, "s.a", "s", 5, 5), sourced(t, "s.b", "s", 5, 5), sourced(t, "other.c", "other", 5, 5)
	ctx := context.Background()
	r1, err1 := l.Admit(ctx, a)
	r2, err2 := l.Admit(ctx, b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	_, err := l.Admit(ctx, a)
	var te *tools.Error
	if !errors.As(err, &te) || string(te.Code) != ReasonServerCap || te.Kind != tools.OverloadError || te.RetryAfter <= 0 {
		t.Fatalf("over the server's cap: %v", err)
	}
	if got := testutil.ToFloat64(l.rejected.WithLabelValues("s.a", ReasonServerCap)); got != 1 {
		t.Errorf("server_capacity rejections of s.a = %v", got)
	}
	if got := testutil.ToFloat64(l.inFlight.WithLabelValues("s.a")); got != 1 {
		t.Errorf("s.a in flight after a refusal = %v, want 1 (the refused call's slot given back)", got)
	}
	rc, err := l.Admit(ctx, c)
	if err != nil {
		t.Fatalf("another server's tool: %v", err)
	}
	rc()
	r1()
	r3, err := l.Admit(ctx, a)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	r2()
	r3()
}

// TestTryAdmit: a slot free now is taken; a busy tool answers "would
// queue" without queueing, counting a refusal or waiting; a cap refuses
// as Admit would.
func TestTryAdmit(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		opts Options
		// busy is how many slots other calls hold first (of 1, queue 1);
		// queued, whether another call waits in the queue too.
		busy     int
		queued   bool
		wantOK   bool
		wantCode string
	}{
		{name: "free slot", wantOK: true},
		{name: "slot taken", busy: 1},
		{name: "slot taken and a waiter", busy: 1, queued: true},
		{name: "slot taken, under a global cap", opts: Options{GlobalCap: 5}, busy: 1},
		{name: "global cap", opts: Options{GlobalCap: 1}, busy: 1, wantCode: ReasonGlobalCap},
		{name: "server cap", opts: Options{ServerCaps: map[string]int{"s": 1}}, busy: 1, wantCode: ReasonServerCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			tt.opts.Registerer = reg
			l := New(tt.opts)
			e := entry(t, 1, 1, time.Minute)
			other := e
			if tt.wantCode != "" { // the caps bind across tools: another tool holds the slot
				e, other = sourced(t, "s.a", "s", 1, 1), sourced(t, "s.b", "s", 1, 1)
			}
			var held []func()
			for range tt.busy {
				rel, err := l.Admit(ctx, other)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, rel)
			}
			var waiter chan result
			if tt.queued {
				waiter = admitAsync(l, ctx, e)
				waitGauge(t, reg, "toold_tool_queue_depth", 1)
			}
			name := e.Spec.Name
			rel, ok, err := l.TryAdmit(e)
			if ok != tt.wantOK || (ok && (rel == nil || err != nil)) {
				t.Fatalf("TryAdmit = %v, %v; want ok %v", ok, err, tt.wantOK)
			}
			var te *tools.Error
			switch {
			case tt.wantCode != "":
				if !errors.As(err, &te) || string(te.Code) != tt.wantCode {
					t.Fatalf("TryAdmit over a cap: %v, want %s", err, tt.wantCode)
				}
			case err != nil:
				t.Fatalf("TryAdmit: %v", err)
			}
			if !tt.wantOK && tt.wantCode == "" {
				for _, reason := range []string{ReasonQueueFull, ReasonQueueTimeout, ReasonGlobalCap, ReasonServerCap, ReasonCancelled, ReasonDeadline} {
					if got := testutil.ToFloat64(l.rejected.WithLabelValues(name, reason)); got != 0 {
						t.Errorf("a busy tool counted %v %s rejections; TryAdmit must only report it", got, reason)
					}
				}
				if got := l.bulkhead(e).waiters.Len(); got != btoi(tt.queued) {
					t.Errorf("queue length %d after TryAdmit, want %d: it must not queue", got, btoi(tt.queued))
				}
				if got, want := l.global.Load(), int64(tt.busy+btoi(tt.queued)); l.cap > 0 && got != want {
					t.Errorf("global count %d after TryAdmit, want %d: a call that did not enter must not count", got, want)
				}
			}
			if ok {
				if got := testutil.ToFloat64(l.inFlight.WithLabelValues(name)); got != 1 {
					t.Errorf("in flight = %v, want 1", got)
				}
				rel()
				if got := testutil.ToFloat64(l.inFlight.WithLabelValues(name)); got != 0 {
					t.Errorf("in flight after release = %v, want 0", got)
				}
			}
			for _, r := range held {
				r()
			}
			if waiter != nil { // the waiter queued before gets the slot, not the TryAdmit
				r := <-waiter
				if r.err != nil {
					t.Fatalf("the waiter: %v", r.err)
				}
				r.release()
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestResizeKeepsEveryCall: a reload that resizes a bulkhead drops no
// call. Grown, the new slots go to the oldest waiters at once; shrunk
// below its running calls, a freed slot is not handed on until the
// bulkhead is back within its size, and the waiters keep their places.
func TestResizeKeepsEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		l := New(Options{Registerer: reg})
		e := entry(t, 1, 4, time.Minute)
		ctx := context.Background()
		first, err := l.Admit(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		var queued []chan result
		for range 3 {
			queued = append(queued, admitAsync(l, ctx, e))
			synctest.Wait()
		}
		// Grown to 3: the two oldest waiters run now, the third waits.
		l.Register(entry(t, 3, 4, time.Minute))
		synctest.Wait()
		var running []func()
		for i, c := range queued[:2] {
			select {
			case r := <-c:
				if r.err != nil {
					t.Fatalf("waiter %d: %v", i, r.err)
				}
				running = append(running, r.release)
			default:
				t.Fatalf("waiter %d still waits after the bulkhead grew", i)
			}
		}
		select {
		case r := <-queued[2]:
			t.Fatalf("the third waiter got a slot the bulkhead does not have: %v", r.err)
		default:
		}
		if v := testutil.ToFloat64(l.capacity.WithLabelValues("t", "in_flight")); v != 3 {
			t.Fatalf("capacity gauge %v after the resize, want 3", v)
		}
		// Shrunk to 1 with 3 running: two releases free no slot for the
		// waiter, the third does.
		l.Register(entry(t, 1, 4, time.Minute))
		first()
		running[0]()
		synctest.Wait()
		select {
		case r := <-queued[2]:
			t.Fatalf("a waiter got a slot while the shrunk bulkhead was over its size: %v", r.err)
		default:
		}
		running[1]()
		synctest.Wait()
		r := <-queued[2]
		if r.err != nil {
			t.Fatalf("the waiter was dropped: %v", r.err)
		}
		r.release()
		if v := testutil.ToFloat64(l.inFlight.WithLabelValues("t")); v != 0 {
			t.Fatalf("%v in flight after every release", v)
		}
	})
}

// TestServerCapsChangeLive: SetServerCaps keeps a source's count of
// running calls, so a lowered cap refuses until enough of them end.
func TestServerCapsChangeLive(t *testing.T) {
	l := New(Options{Registerer: prometheus.NewRegistry(), ServerCaps: map[string]int{"up": 2}})
	r, err := registry.New(registry.Options{}, spec{Name: "up.a", Description: "d", Category: tools.MCP, Source: "up",
		Parameters: json.RawMessage(`{"type":"object"}`), Limits: tools.Limits{MaxInFlight: 10, MaxQueue: 10, QueueWait: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("up.a")
	ctx := context.Background()
	a, err := l.Admit(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Admit(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	l.SetServerCaps(map[string]int{"up": 1})
	a()
	if _, err := l.Admit(ctx, e); err == nil {
		t.Fatal("a call was admitted past the lowered cap while two ran")
	}
	b()
	c, err := l.Admit(ctx, e)
	if err != nil {
		t.Fatalf("the cap of 1 refused the only call: %v", err)
	}
	c()
	l.SetServerCaps(nil)
	var rel []func()
	for range 5 {
		r, err := l.Admit(ctx, e)
		if err != nil {
			t.Fatalf("uncapped source refused: %v", err)
		}
		rel = append(rel, r)
	}
	for _, r := range rel {
		r()
	}
}
