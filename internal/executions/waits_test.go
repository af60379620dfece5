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

// TestEndedWaitsReleaseTheirTimers: a waiting execution's timer is a work
// message held back until the wait expires, and so takes one of the
// consumer's MaxAckPending slots. A wait that ends early — answered,
// cancelled — must give its slot back at once, or executions that come and
// go faster than the wait timeout fill the consumer and stall every
// replica's queue. Parked sync calls and paused async ones alike.
func TestEndedWaitsReleaseTheirTimers(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st, await.Tools(await.Options{})...)
	r.start(t)
	ctx := context.Background()
	ask := []byte(`{"prompt":"may I go on?"}`)

	var ids []string
	for range 3 { // async: the step's own message becomes the timer
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "request_user_input", Body: ask, Caller: "k", RequestID: "r"})
		if err != nil || refusal != nil {
			t.Fatal(err, refusal)
		}
		waitStatus(t, r, rec.ID, dispatch.StatusWaiting)
		ids = append(ids, rec.ID)
	}
	for range 3 { // sync: a parked call's timer is a message of its own
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
	ackPending := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ci, err := cons.Info(ctx)
			if err == nil && ci.NumAckPending == want && ci.NumPending == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ack pending: got %+v (%v), want %d", ci, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ackPending(6) // every wait holds its timer

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
	ackPending(2) // only the two still waiting hold a slot
	for _, id := range ids[4:] {
		if rec, err := r.svc.Get(ctx, "k", id); err != nil || rec.Status != dispatch.StatusWaiting {
			t.Fatalf("a wait nobody ended: %v %+v", err, rec)
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
