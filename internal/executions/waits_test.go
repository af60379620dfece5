package executions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/await"
)

// TestWaitsHoldNoQueueSlot: a waiting execution's timer is a message the
// server schedules, not a work message held back. Held back, each open
// wait took one of the work consumer's MaxAckPending slots (100,000), and
// past that many open waits the queue delivered nothing more: no
// execution, no resumption. Here six waits (async ones paused by a worker,
// sync ones parked) hold no slot and one timer each; a wait that ends
// early (answered, cancelled) deletes its timer.
func TestWaitsHoldNoQueueSlot(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st, await.Tools(await.Options{})...)
	r.start(t)
	ctx := context.Background()
	ask := []byte(`{"prompt":"may I go on?"}`)

	var ids []string
	for range 3 {
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "request_user_input", Body: ask, Caller: "k", RequestID: "r"})
		if err != nil || refusal != nil {
			t.Fatal(err, refusal)
		}
		waitStatus(t, r, rec.ID, dispatch.StatusWaiting)
		ids = append(ids, rec.ID)
	}
	for range 3 {
		env := r.d.Execute(ctx, &dispatch.Request{Tool: "request_user_input", Body: ask, RequestID: "r", Caller: "k"})
		if env.Status != dispatch.StatusWaiting {
			t.Fatalf("a sync call did not pause: %+v", env)
		}
		rec, err := r.svc.Park(ctx, &dispatch.Request{Tool: "request_user_input", Body: ask, Caller: "k", RequestID: "r"}, env)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	cons, err := st.JetStream().Consumer(ctx, state.WorkStream, "toold-workers")
	if err != nil {
		t.Fatal(err)
	}
	timers, err := st.JetStream().Stream(ctx, state.TimersStream)
	if err != nil {
		t.Fatal(err)
	}
	held := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ci, err := cons.Info(ctx)
			si, serr := timers.Info(ctx)
			if err == nil && serr == nil && ci.NumAckPending == 0 && ci.NumPending == 0 && si.State.Msgs == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("work consumer %+v (%v), timers %+v (%v); want no slot held and %d timers", ci, err, si, serr, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	held(6)
	for i, id := range ids[:4] {
		if i%2 == 0 {
			if _, err := r.svc.Resume(ctx, "k", id, "input", json.RawMessage(`"yes"`)); err != nil {
				t.Fatal(err)
			}
			if got, err := r.svc.WaitFinal(ctx, "k", id, 10*time.Second); err != nil || got.Status != dispatch.StatusSuccess {
				t.Fatalf("resumed: %v %+v", err, got)
			}
		} else if got, err := r.svc.Cancel(ctx, "k", id); err != nil || got.Status != dispatch.StatusCancelled {
			t.Fatalf("cancelled: %v %+v", err, got)
		}
	}
	held(2)
	for _, id := range ids[4:] {
		if rec, err := r.svc.Get(ctx, "k", id); err != nil || rec.Status != dispatch.StatusWaiting {
			t.Fatalf("a wait nobody ended: %v %+v", err, rec)
		}
	}
}

// brief asks a question it waits at most a second for.
type brief struct{}

func (brief) Spec() tools.Spec {
	return tools.Spec{Name: "brief", Description: "Asks briefly.", Category: tools.Direct, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (brief) Execute(context.Context, *tools.Call) (any, error) {
	return nil, &tools.Pause{Input: &tools.InputRequest{Prompt: "quick?"}, Timeout: time.Second}
}

// TestWaitExpires: the timer fires when the wait expires, on whichever
// replica takes it, and ends the execution wait_expired — async and
// parked alike.
func TestWaitExpires(t *testing.T) {
	sa, sb := statetest.OpenPair(t, state.Options{})
	a, b := newReplica(t, sa, brief{}), newReplica(t, sb, brief{})
	a.start(t)
	b.start(t)
	ctx := context.Background()
	rec, refusal, err := a.svc.Submit(ctx, executions.Call{Tool: "brief", Body: []byte(`{}`), Caller: "k", RequestID: "r"})
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	req := &dispatch.Request{Tool: "brief", Body: []byte(`{}`), RequestID: "r", Caller: "k"}
	parked, err := b.svc.Park(ctx, req, b.d.Execute(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{rec.ID, parked.ID} {
		got, err := a.svc.WaitFinal(ctx, "k", id, 10*time.Second)
		if err != nil || got.Status != dispatch.StatusTimeout || !strings.Contains(string(got.Envelope), "wait_expired") {
			t.Fatalf("%s: %v %+v", id, err, got)
		}
	}
}

// down fails as an unreachable upstream does, and falls back.
type down struct{ fallback string }

func (d down) Spec() tools.Spec {
	return tools.Spec{Name: "down", Description: "Always down.", Category: tools.Direct, Fallback: []string{d.fallback},
		Parameters: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","minLength":1}},"required":["prompt"],"additionalProperties":false}`)}
}

func (down) Execute(context.Context, *tools.Call) (any, error) {
	return nil, tools.Errorf(tools.SystemError, "the API is down").WithCode("upstream_unavailable")
}

// TestFallbackThatPauses: when a tool's fallback pauses, the execution
// waits as that tool, and the answer resumes it, not the tool that failed.
func TestFallbackThatPauses(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st, append(await.Tools(await.Options{}), down{fallback: "request_user_input"})...)
	r.start(t)
	ctx := context.Background()
	rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "down", Body: []byte(`{"prompt":"Go on?"}`), Caller: "k", RequestID: "r"})
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	if w := waitStatus(t, r, rec.ID, dispatch.StatusWaiting); w.Tool != "request_user_input" {
		t.Fatalf("the execution waits as %q", w.Tool)
	}
	if _, err := r.svc.Resume(ctx, "k", rec.ID, "input", json.RawMessage(`"yes"`)); err != nil {
		t.Fatal(err)
	}
	got, err := r.svc.WaitFinal(ctx, "k", rec.ID, 10*time.Second)
	if err != nil || got.Status != dispatch.StatusSuccess || !strings.Contains(string(got.Envelope), `"answer":"yes"`) {
		t.Fatalf("the resumed fallback: %v %+v %s", err, got, got.Envelope)
	}
}
