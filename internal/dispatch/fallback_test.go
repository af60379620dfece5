package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// scripted is a tool that answers with a fixed error (or its arguments),
// and records what it received.
type scripted struct {
	name     string
	category tools.Category
	err      *tools.Error
	sleep    time.Duration
	fallback []string
	limits   tools.Limits
	calls    atomic.Int64
	lastArgs atomic.Value
}

func (s *scripted) Spec() tools.Spec {
	return tools.Spec{Name: s.name, Description: "A scripted tool.", Category: s.category, Fallback: s.fallback, Limits: s.limits,
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
}

func (s *scripted) Execute(ctx context.Context, c *tools.Call) (any, error) {
	s.calls.Add(1)
	s.lastArgs.Store(string(c.Args))
	if s.sleep > 0 {
		select {
		case <-time.After(s.sleep):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return map[string]string{"answered_by": s.name}, nil
}

func tool(name string, err *tools.Error, fallback ...string) *scripted {
	return &scripted{name: name, category: tools.Direct, err: err, fallback: fallback}
}

var (
	down             = tools.Errorf(tools.SystemError, "the API is down").WithCode("upstream_unavailable").WithRetryAfter(2 * time.Second)
	limited          = tools.Errorf(tools.OverloadError, "rate limited").WithCode("upstream_rate_limited").WithRetryAfter(time.Second)
	notFound         = tools.NewUserError("no such issue")
	permissionDenied = tools.NewPermissionError("bad credentials")
)

type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) Observe(e *registry.Entry, env *Envelope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, e.Spec.Name+":"+string(env.Status))
}
func (r *recorder) Stuck(*registry.Entry, int) {}

func steps(env *Envelope) []string {
	var out []string
	for _, s := range env.FallbackFrom {
		code := ""
		if s.Error != nil {
			code = string(s.Error.Code)
		}
		out = append(out, s.Tool+":"+string(s.Status)+":"+code)
	}
	return out
}

// TestFallbackChain: a failure another tool may get past runs the
// fallbacks depth first, each through the whole pipeline (observers see
// every pass), until one answers; the envelope names the answering tool and
// lists the failures before it, with why.
func TestFallbackChain(t *testing.T) {
	slow := tool("slow", nil, "limited")
	slow.sleep, slow.limits = time.Second, tools.Limits{Timeout: 30 * time.Millisecond, Target: time.Millisecond, Max: 2 * time.Millisecond}
	a := tool("a", down, "slow", "c")
	rec := &recorder{}
	d := newDispatcher(t, []Observer{rec}, a, slow, tool("limited", limited), tool("c", nil), tool("unused", nil))
	env := d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`), RequestID: "r1"})
	if env.Status != StatusSuccess || env.Tool != "c" || !strings.Contains(string(env.Data), `"answered_by":"c"`) {
		t.Fatalf("got %s from %s: %s %+v", env.Status, env.Tool, env.Data, env.Error)
	}
	want := []string{"a:error:upstream_unavailable", "slow:timeout:", "limited:error:upstream_rate_limited"}
	if got := steps(env); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("fallback_from %v, want %v", got, want)
	}
	if s := env.FallbackFrom[0]; !s.Error.Retryable || s.Error.RetryAfterMS != 2000 || s.DurationMS <= 0 {
		t.Errorf("the primary's step lost why it failed: %+v %+v", s, s.Error)
	}
	if env.DurationMS < 30 || env.RequestID != "r1" {
		t.Errorf("duration %v covers less than the whole call, or the request id changed", env.DurationMS)
	}
	if got := strings.Join(rec.seen, " "); got != "a:error slow:timeout limited:error c:success" {
		t.Errorf("observers saw %s", got)
	}
}

// TestNoFallbackWhenNotRetryable: a failure the caller or the operator
// must fix ends the call; so does a fallback's own such failure.
func TestNoFallbackWhenNotRetryable(t *testing.T) {
	for _, tt := range []struct {
		name string
		tool *scripted
		body string
		want string
	}{
		{"user error", tool("a", notFound, "b"), `{"q":"x"}`, "a"},
		{"permission", tool("a", permissionDenied, "b"), `{"q":"x"}`, "a"},
		{"validation", tool("a", nil, "b"), `{"q":1}`, "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tool("b", nil)
			d := newDispatcher(t, nil, tt.tool, b)
			env := d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(tt.body)})
			if env.Tool != tt.want || env.Success || env.FallbackFrom != nil || b.calls.Load() != 0 {
				t.Fatalf("%s answered %s (fallback ran %d times)", env.Tool, env.Status, b.calls.Load())
			}
		})
	}
	a, b, c := tool("a", down, "b", "c"), tool("b", notFound), tool("c", nil)
	d := newDispatcher(t, nil, a, b, c)
	env := d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`)})
	if env.Tool != "b" || env.Error.Type != tools.UserError || c.calls.Load() != 0 || len(env.FallbackFrom) != 1 {
		t.Fatalf("a fallback's user error did not end the call: %s %+v, c ran %d", env.Tool, env.Error, c.calls.Load())
	}
}

// TestFallbackRunsItsOwnPipeline: the fallback gets the caller's arguments
// through its own input sanitizer (an external_api tool's redacts secrets a
// direct tool's lets through) and its own bulkhead.
func TestFallbackRunsItsOwnPipeline(t *testing.T) {
	a := tool("a", down, "ext")
	ext := tool("ext", nil)
	ext.category = tools.ExternalAPI
	d := newDispatcher(t, nil, a, ext)
	secret := "AKIAIOSFODNN7EXAMPLF"
	env := d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"key ` + secret + `"}`)})
	if !env.Success || !strings.Contains(a.lastArgs.Load().(string), secret) || strings.Contains(ext.lastArgs.Load().(string), secret) {
		t.Fatalf("%s; primary saw %s, fallback saw %s", env.Status, a.lastArgs.Load(), ext.lastArgs.Load())
	}

	busy := tool("busy", nil)
	busy.sleep, busy.limits = 200*time.Millisecond, tools.Limits{MaxInFlight: 1, MaxQueue: tools.NoQueue}
	d = newDispatcher(t, nil, tool("a", down, "busy"), busy)
	hold := make(chan *Envelope)
	go func() { hold <- d.Execute(context.Background(), &Request{Tool: "busy", Body: []byte(`{"q":"x"}`)}) }()
	waitFor(t, func() bool { return busy.calls.Load() == 1 }, "busy to start")
	env = d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`)})
	if env.Tool != "busy" || env.Error == nil || env.Error.Code != "queue_full" {
		t.Fatalf("the fallback's own bulkhead did not refuse: %s %+v", env.Tool, env.Error)
	}
	<-hold
}

// TestFallbackRespectsCaller: a fallback the caller's key may not use is
// skipped; a caller's timeout bounds the whole call; a stream opens once.
func TestFallbackRespectsCaller(t *testing.T) {
	b := tool("b", nil)
	d := newDispatcher(t, nil, tool("a", down, "b"), b)
	env := d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`),
		Allowed: func(name string) bool { return name == "a" }})
	if env.Tool != "a" || env.FallbackFrom != nil || b.calls.Load() != 0 {
		t.Fatalf("a forbidden fallback ran: %s", env.Tool)
	}

	slow := tool("a", nil, "b")
	slow.sleep = time.Second
	d = newDispatcher(t, nil, slow, b)
	env = d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`), Timeout: 20 * time.Millisecond})
	if env.Status != StatusTimeout || env.Tool != "a" || b.calls.Load() != 0 {
		t.Fatalf("the fallback ran past the caller's timeout: %s %s", env.Tool, env.Status)
	}

	var opened atomic.Int64
	d = newDispatcher(t, nil, tool("a", down, "b"), b)
	env = d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`), OnStart: func() { opened.Add(1) }})
	if !env.Success || opened.Load() != 1 {
		t.Fatalf("%s; the stream opened %d times", env.Status, opened.Load())
	}
}

// TestNoFallbackForAResumedStep: a resumed step that fails does not fall
// back: its answer belongs to the tool that paused.
func TestNoFallbackForAResumedStep(t *testing.T) {
	b := tool("b", nil)
	d := newDispatcher(t, nil, tool("a", down, "b"), b)
	env := d.Execute(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`), Confirmed: true,
		Resume: &tools.Resumption{For: tools.WaitInput, Answer: json.RawMessage(`"yes"`), Step: 1}})
	if env.Tool != "a" || env.FallbackFrom != nil || b.calls.Load() != 0 {
		t.Fatalf("a resumed step fell back: %s %s (b ran %d)", env.Tool, env.Status, b.calls.Load())
	}
}

// TestInvalidOutputFromTool: a tool that reports an unusable answer with
// the code invalid_output gets that status, and attempts it counted reach
// the timing.
func TestInvalidOutputFromTool(t *testing.T) {
	d := newDispatcher(t, nil, countingTool{})
	env := d.Execute(context.Background(), &Request{Tool: "counting", Body: []byte(`{}`)})
	if env.Status != StatusInvalidOutput || env.Timing.Attempts != 3 || env.Timing.WaitMS != 1.5 {
		t.Fatalf("got %s, timing %+v", env.Status, env.Timing)
	}
}

type countingTool struct{}

func (countingTool) Spec() tools.Spec {
	return tools.Spec{Name: "counting", Description: "Counts attempts.", Category: tools.ExternalAPI,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (countingTool) Execute(_ context.Context, c *tools.Call) (any, error) {
	for range 3 {
		c.CountAttempt()
	}
	c.CountWait(1500 * time.Microsecond)
	return nil, tools.Errorf(tools.SystemError, "the API answered with something that is not JSON").WithCode("invalid_output")
}

// TestCheckIsRecorded: a call refused by Check is observed like a call
// refused by Execute: the metrics observers see it too.
func TestCheckIsRecorded(t *testing.T) {
	rec := &recorder{}
	d := newDispatcher(t, []Observer{rec}, tool("a", nil))
	if env := d.Check(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":1}`)}); env == nil || env.Status != StatusRejected {
		t.Fatalf("Check let an invalid call through: %+v", env)
	}
	if env := d.Check(context.Background(), &Request{Tool: "a", Body: []byte(`{"q":"x"}`)}); env != nil {
		t.Fatalf("Check refused a valid call: %+v", env.Error)
	}
	if got := strings.Join(rec.seen, " "); got != "a:rejected" {
		t.Errorf("observers saw %q", got)
	}
}
