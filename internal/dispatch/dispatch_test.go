package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/diag"
)

type noop struct{}

func (noop) Spec() tools.Spec {
	return tools.Spec{Name: "noop", Description: "Does nothing.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`)}
}
func (noop) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]bool{"ok": true}, nil
}

// ctxIgnorer sleeps without looking at its context.
type ctxIgnorer struct{ d time.Duration }

func (c ctxIgnorer) Spec() tools.Spec {
	return tools.Spec{Name: "ignorer", Description: "Ignores cancellation.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`),
		Limits:     tools.Limits{Timeout: 20 * time.Millisecond, Target: time.Millisecond, Max: 2 * time.Millisecond, MaxInFlight: 1, MaxQueue: tools.NoQueue}}
}
func (c ctxIgnorer) Execute(context.Context, *tools.Call) (any, error) {
	time.Sleep(c.d)
	return "done", nil
}

type stuckCounter struct{ n atomic.Int64 }

func (s *stuckCounter) Observe(*registry.Entry, *Envelope) {}
func (s *stuckCounter) Stuck(_ *registry.Entry, delta int) { s.n.Add(int64(delta)) }

func newDispatcher(tb testing.TB, obs []Observer, ts ...tools.Tool) *Dispatcher {
	tb.Helper()
	return newDispatcherWith(tb, limits.New(limits.Options{}), obs, ts...)
}

func newDispatcherWith(tb testing.TB, lim *limits.Limiter, obs []Observer, ts ...tools.Tool) *Dispatcher {
	tb.Helper()
	reg, err := registry.New(registry.Options{}, ts...)
	if err != nil {
		tb.Fatal(err)
	}
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := New(Options{Registry: registry.NewLive(reg, registry.Options{}), Sanitizer: san, Limiter: lim,
		Observers: obs, StuckAfter: 30 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// blocker ignores its context until unblock is closed.
type blocker struct{ unblock chan struct{} }

func (blocker) Spec() tools.Spec {
	return tools.Spec{Name: "blocker", Description: "Ignores cancellation until released.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`),
		Limits:     tools.Limits{Timeout: 20 * time.Millisecond, Target: time.Millisecond, Max: 2 * time.Millisecond, MaxInFlight: 1, MaxQueue: tools.NoQueue}}
}
func (b blocker) Execute(context.Context, *tools.Call) (any, error) {
	<-b.unblock
	return "done", nil
}

// TestStuckCallsAreAccounted: a tool that ignores its context is answered
// at its deadline; once it outlives the deadline by StuckAfter it is
// counted as stuck (observer, limiter) and its slot is freed, so one stuck
// call cannot make the tool refuse everyone. The budget of freed slots is
// the tool's max_in_flight: past it, stuck calls keep their slots and the
// refusal says why. Everything returns to zero when the tool returns.
func TestStuckCallsAreAccounted(t *testing.T) {
	sc := &stuckCounter{}
	lim := limits.New(limits.Options{})
	tool := blocker{unblock: make(chan struct{})}
	d := newDispatcherWith(t, lim, []Observer{sc}, tool)
	call := func(id string) *Envelope {
		return d.Execute(context.Background(), &Request{Tool: "blocker", RequestID: id})
	}
	if env := call("a"); env.Status != StatusTimeout {
		t.Fatalf("first call: %s %+v", env.Status, env.Error)
	}
	waitFor(t, func() bool { return sc.n.Load() == 1 && lim.StuckCalls()["blocker"] == 1 }, "the first call to count as stuck")
	// Its slot was freed: the next call runs (and gets stuck too).
	if env := call("b"); env.Status != StatusTimeout {
		t.Fatalf("second call, after the first was detached: %s %+v", env.Status, env.Error)
	}
	waitFor(t, func() bool { return sc.n.Load() == 2 && lim.StuckCalls()["blocker"] == 2 }, "the second call to count as stuck")
	// The budget (max_in_flight 1) is spent: the second keeps its slot, and
	// the refusal names the stuck calls.
	env := call("c")
	if env.Status != StatusRejected || env.Error.Type != tools.OverloadError || !strings.Contains(env.Error.Message, "2 of its calls ignored their deadline") {
		t.Fatalf("third call: %s %+v", env.Status, env.Error)
	}
	close(tool.unblock)
	waitFor(t, func() bool { return sc.n.Load() == 0 && lim.StuckCalls() == nil }, "the stuck count to return to 0")
	if env := call("d"); env.Status != StatusSuccess { // the slots are back; it no longer blocks
		t.Fatalf("fourth call: %s %+v", env.Status, env.Error)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCallerCancelled(t *testing.T) {
	d := newDispatcher(t, nil, ctxIgnorer{d: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := d.Execute(ctx, &Request{Tool: "ignorer"})
	if env.Error == nil || env.Error.Code != "cancelled" {
		t.Fatalf("got %+v", env.Error)
	}
}

// cancelsCaller cancels its caller's context, with cause, as it starts,
// then holds its slot until released: the cancellation comes while it
// runs, whatever the machine's speed.
type cancelsCaller struct {
	cancel  context.CancelCauseFunc
	cause   error
	release chan struct{}
}

func (c cancelsCaller) Spec() tools.Spec {
	return tools.Spec{Name: "cancels", Description: "Cancels its caller.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`), Limits: tools.Limits{Timeout: time.Minute}}
}
func (c cancelsCaller) Execute(context.Context, *tools.Call) (any, error) {
	c.cancel(c.cause)
	<-c.release
	return "done", nil
}

// TestCancelCause: a context cancelled with a *tools.Error as its cause
// (toold's drain) answers with that error, not "cancelled by its caller".
func TestCancelCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := tools.Errorf(tools.OverloadError, "shutting down").WithCode("draining")
	tool := cancelsCaller{cancel: cancel, cause: cause, release: make(chan struct{})}
	defer close(tool.release)
	d := newDispatcher(t, nil, tool)
	env := d.Execute(ctx, &Request{Tool: "cancels", Timeout: time.Minute})
	if env.Error == nil || env.Error.Code != "draining" {
		t.Fatalf("got %+v", env.Error)
	}
}

func TestPermission(t *testing.T) {
	d := newDispatcher(t, nil, noop{})
	env := d.Execute(context.Background(), &Request{Tool: "noop", Allowed: func(string) bool { return false }})
	if env.Status != StatusRejected || env.Error.Type != tools.PermissionError {
		t.Fatalf("got %s %+v", env.Status, env.Error)
	}
}

func TestWrapperOffWhenToolHasArgumentsParam(t *testing.T) {
	d := newDispatcher(t, nil, argsTool{})
	env := d.Execute(context.Background(), &Request{Tool: "args", Body: []byte(`{"arguments":{"a":1}}`), Unwrap: true})
	if env.Status != StatusSuccess || !strings.Contains(string(env.Data), `"arguments"`) {
		t.Fatalf("the tool's own arguments parameter was unwrapped: %s %s", env.Status, env.Data)
	}
}

type argsTool struct{}

func (argsTool) Spec() tools.Spec {
	return tools.Spec{Name: "args", Description: "Has a parameter named arguments.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"arguments":{"type":"object"}}}`)}
}
func (argsTool) Execute(_ context.Context, c *tools.Call) (any, error) { return c.Args, nil }

// BenchmarkDispatch measures the pipeline itself with a no-op tool: strict
// decode, schema validation, sanitization, bulkhead, goroutine hand-off,
// result encoding.
func BenchmarkDispatch(b *testing.B) {
	d := newDispatcher(b, nil, noop{})
	body := []byte(`{"x":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		env := d.Execute(ctx, &Request{Tool: "noop", Body: body, RequestID: "bench"})
		if !env.Success {
			b.Fatal(env.Error)
		}
	}
}

// BenchmarkDispatchEcho is the load harness's call in process: a typed tool
// with a derived output schema, through every step.
func BenchmarkDispatchEcho(b *testing.B) {
	d := newDispatcher(b, nil, diag.Echo())
	body := []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		env := d.Execute(ctx, &Request{Tool: "echo", Body: body, RequestID: "bench"})
		if !env.Success {
			b.Fatal(env.Error)
		}
	}
}

// TestPanicInPrepareReachesCaller: a panic while preparing a call (on a
// worker) is raised in the caller's goroutine, not the worker's, so the
// process survives and the server's recoverer answers it.
func TestPanicInPrepareReachesCaller(t *testing.T) {
	d := newDispatcher(t, nil, noop{})
	d.Swap(Stages{Sanitizer: panickySanitizer{d.opts.Sanitizer}})
	defer func() {
		if recover() == nil {
			t.Fatal("the panic did not reach the caller")
		}
	}()
	d.Execute(context.Background(), &Request{Tool: "noop", Body: []byte(`{"x":"a"}`)})
}

type panickySanitizer struct{ Sanitizer }

func (panickySanitizer) Input(context.Context, *tools.Spec, any) (any, sanitize.Report, error) {
	panic("sanitizer bug")
}

type rawResult struct{ raw string }

func (r rawResult) Spec() tools.Spec {
	return tools.Spec{Name: "raw", Description: "Returns JSON it holds.", Category: tools.Direct, Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (r rawResult) Execute(context.Context, *tools.Call) (any, error) {
	return json.RawMessage(r.raw), nil
}

// TestRawMessageResult: a result already held as JSON is passed to the
// output sanitizer as it is (still redacted); one that is not valid JSON
// comes back as a string with a note, never as a broken envelope.
func TestRawMessageResult(t *testing.T) {
	d := newDispatcher(t, nil, rawResult{`{"user": "ada@example.com", "n": [1, 2]}`})
	env := d.Execute(context.Background(), &Request{Tool: "raw"})
	if !env.Success || !strings.Contains(string(env.Data), `[REDACTED:email]`) || !json.Valid(env.AppendJSON(nil)) {
		t.Fatalf("%s %s", env.Status, env.Data)
	}
	d = newDispatcher(t, nil, rawResult{`{"broken": `})
	env = d.Execute(context.Background(), &Request{Tool: "raw"})
	if !env.Success || !json.Valid(env.AppendJSON(nil)) || len(env.Sanitized.Notes) == 0 {
		t.Fatalf("%s %s %v", env.Status, env.Data, env.Sanitized.Notes)
	}
}

// failsWith fails with an error carrying a result.
type failsWith struct{ result any }

func (failsWith) Spec() tools.Spec {
	return tools.Spec{Name: "fails", Description: "Fails with a result.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`), Output: json.RawMessage(`{"type":"object","required":["ok"]}`)}
}
func (f failsWith) Execute(context.Context, *tools.Call) (any, error) {
	return nil, tools.NewUserError("it exited with code 1").WithCode("exit_status").WithResult(f.result)
}

// TestFailureCarriesItsResult: a failure that carries a result is a failed
// envelope whose data is that result, sanitized as any output and not held
// to the output schema; one that cannot be encoded is dropped, never shown
// raw.
func TestFailureCarriesItsResult(t *testing.T) {
	d := newDispatcher(t, nil, failsWith{map[string]string{"stderr": "mail ada@example.com"}})
	env := d.Execute(context.Background(), &Request{Tool: "fails"})
	if env.Status != StatusError || env.Success || env.Error == nil || env.Error.Code != "exit_status" {
		t.Fatalf("%s %+v", env.Status, env.Error)
	}
	if got := string(env.Data); got != `{"stderr":"mail [REDACTED:email]"}` || env.Sanitized.Redactions != 1 {
		t.Fatalf("data %s, %d redactions", got, env.Sanitized.Redactions)
	}
	if b := env.AppendJSON(nil); !json.Valid(b) || !strings.Contains(string(b), `"data":{"stderr"`) {
		t.Fatalf("envelope %s", b)
	}
	d = newDispatcher(t, nil, failsWith{func() {}})
	env = d.Execute(context.Background(), &Request{Tool: "fails"})
	if env.Status != StatusError || env.Data != nil {
		t.Fatalf("unencodable result: %s %s", env.Status, env.Data)
	}
}

// callLog is a CallObserver that records what it is told.
type callLog struct {
	stuckCounter
	mu    sync.Mutex
	lines []string
}

func (l *callLog) CallStarted(c *CallInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, "start "+c.Tool+" "+c.Caller+" "+c.ExecutionID+" "+string(c.Args))
}

func (l *callLog) CallEnded(c *CallInfo, env *Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, "end "+c.Tool+" "+string(env.Status)+" "+string(c.Args))
}

// TestCallObserver: a call observer hears of the start of every call that
// runs, and of the end of every call, refused or unknown ones too, with the
// caller and the arguments the tool saw.
func TestCallObserver(t *testing.T) {
	l := &callLog{}
	d := newDispatcher(t, []Observer{l}, noop{})
	for _, r := range []*Request{
		{Tool: "noop", Body: []byte(`{"x":"a"}`), Caller: "k", ExecutionID: "e1"},
		{Tool: "noop", Body: []byte(`{"y":1}`), Caller: "k"},
		{Tool: "nope", Body: []byte(`{}`), Caller: "k"},
	} {
		d.Execute(context.Background(), r)
	}
	want := []string{`start noop k e1 {"x":"a"}`, `end noop success {"x":"a"}`, `end noop rejected {"y":1}`, "end " + registry.UnknownName("nope") + " not_found {}"} // a name no tool has is never told as typed
	if diff := cmp.Diff(want, l.lines); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestCheck: a call that would run passes; a refusal comes back as the
// envelope Execute would give, and is observed.
func TestCheck(t *testing.T) {
	l := &callLog{}
	d := newDispatcher(t, []Observer{l}, noop{})
	if env := d.Check(context.Background(), &Request{Tool: "noop", Body: []byte(`{"x":"a"}`)}); env != nil {
		t.Fatalf("a good call refused: %+v", env.Error)
	}
	for _, tt := range []struct {
		req  *Request
		want Status
		kind tools.Kind
	}{
		{&Request{Tool: "nope"}, StatusNotFound, tools.NotFound},
		{&Request{Tool: "noop", Body: []byte(`{"x":1}`)}, StatusRejected, tools.ValidationError},
		{&Request{Tool: "noop", Allowed: func(string) bool { return false }}, StatusRejected, tools.PermissionError},
	} {
		env := d.Check(context.Background(), tt.req)
		if env == nil || env.Status != tt.want || env.Error.Type != tt.kind {
			t.Errorf("%s %s: %+v", tt.req.Tool, tt.req.Body, env)
		}
	}
	if len(l.lines) != 3 {
		t.Errorf("observed %q", l.lines)
	}
}

// The hot path's allocations stay within budget: a no-op call through the
// whole pipeline took 54 before the hand-offs to workers were pooled and the
// call and its envelope became one allocation, 46 before strict decoding
// reused its tokenizer, 38 before the input sanitizer's walk reused its
// buffers and its policy lookup stopped building a key (issue 17).
func TestDispatchAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	d := newDispatcher(t, nil, noop{})
	body := []byte(`{"x":"hello"}`)
	ctx := context.Background()
	const budget = 34
	got := testing.AllocsPerRun(200, func() {
		if env := d.Execute(ctx, &Request{Tool: "noop", Body: body, RequestID: "bench"}); !env.Success {
			t.Fatal(env.Error)
		}
	})
	t.Logf("%.1f allocations per call", got)
	if got > budget {
		t.Errorf("%.0f allocations per call, budget %d", got, budget)
	}
}

// TestGoRunsOnWorkers: Go hands f to a worker and returns at once, even
// while every worker it started is busy, and a worker that finished takes
// the next f.
func TestGoRunsOnWorkers(t *testing.T) {
	d := newDispatcher(t, nil)
	release := make(chan struct{})
	first, second := make(chan struct{}), make(chan struct{})
	d.Go(func() { close(first); <-release })
	<-first
	d.Go(func() { close(second) }) // the first worker is busy: a second one runs it
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("Go waited for a busy worker")
	}
	close(release)
	ran := make(chan int, 8)
	for i := range 8 {
		d.Go(func() { ran <- i })
	}
	seen := map[int]bool{}
	for range 8 {
		select {
		case i := <-ran:
			seen[i] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("ran %d of 8", len(seen))
		}
	}
	if len(seen) != 8 {
		t.Fatalf("ran %v, want each of 8 once", seen)
	}
}
