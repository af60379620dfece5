package executions_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
)

// gate runs one call at a time: each run holds its slot until open is
// closed. Unless it queues, a call that finds the slot taken is refused
// queue_full at once; queueing, it waits for the slot 200ms and is
// refused queue_timeout.
type gate struct {
	open   chan struct{}
	runs   *atomic.Int64
	queues bool
}

func (g gate) Spec() tools.Spec {
	l := tools.Limits{MaxInFlight: 1, MaxQueue: tools.NoQueue}
	if g.queues {
		l.MaxQueue, l.QueueWait = 1, 200*time.Millisecond
	}
	return tools.Spec{Name: "gate", Description: "One at a time.", Category: tools.Direct, Parameters: json.RawMessage(`{"type":"object"}`),
		Limits: l}
}

func (g gate) Execute(ctx context.Context, _ *tools.Call) (any, error) {
	g.runs.Add(1)
	select {
	case <-g.open:
		return map[string]bool{"through": true}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestAcceptedCallIsNeverRefused: an accepted execution whose run the
// pipeline refuses for a reason that passes — here its tool's bulkhead,
// full with a sync call, answering queue_full — goes back to the queue
// (pending, the attempt not counted) and runs once it can, instead of
// ending rejected: work toold accepted is not refused after the fact
// (issue 38). One the pipeline keeps refusing past its deadline ends
// timeout, saying what kept it from running.
func TestAcceptedCallIsNeverRefused(t *testing.T) {
	for _, c := range []struct {
		name           string
		inline, queues bool
	}{
		{"through the queue", false, false},
		{"run where accepted, refused at once", true, false},
		{"run where accepted, kept, then refused", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gate{open: make(chan struct{}), runs: &atomic.Int64{}, queues: c.queues}
			r := newReplicaOpts(t, statetest.Open(t, nil, "a"), replicaOptions{queued: !c.inline}, g)
			r.start(t)
			ctx := context.Background()
			held := make(chan *dispatch.Envelope, 1)
			go func() {
				held <- r.d.Execute(ctx, dispatch.NewRequest("gate", []byte(`{}`), "sync", dispatch.From{Name: "k"}))
			}()
			waitFor(t, "the sync call to hold the slot", func() bool { return g.runs.Load() == 1 })
			call := executions.Call{Tool: "gate", Body: []byte(`{}`), Caller: "k", RequestID: "async"}
			if c.inline {
				call.Wait = time.Second // its caller waits: it runs here at once
			}
			rec, refusal, err := r.svc.Submit(ctx, call)
			if err != nil || refusal != nil || rec == nil {
				t.Fatalf("accepting: %v %+v", err, refusal)
			}
			// Refused and put back, again and again, while the slot is held:
			// never an end.
			for range 10 {
				got, err := r.svc.Get(ctx, "k", rec.ID)
				if err != nil || got.Status.Final() {
					t.Fatalf("while its tool was full: %s %v", got.View().AppendJSON(nil), err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			close(g.open)
			<-held
			final := waitStatus(t, r, rec.ID, dispatch.StatusSuccess)
			if final.Attempt != 1 || g.runs.Load() != 2 {
				t.Fatalf("ran as attempt %d; the tool ran %d times", final.Attempt, g.runs.Load())
			}
		})
	}
	t.Run("past its deadline", func(t *testing.T) {
		g := gate{open: make(chan struct{}), runs: &atomic.Int64{}}
		r := newReplicaOpts(t, statetest.Open(t, nil, "a"), replicaOptions{queued: true}, g)
		r.svc.YieldFor(500 * time.Millisecond)
		r.start(t)
		ctx := context.Background()
		held := make(chan *dispatch.Envelope, 1)
		go func() {
			held <- r.d.Execute(ctx, dispatch.NewRequest("gate", []byte(`{}`), "sync", dispatch.From{Name: "k"}))
		}()
		defer func() { close(g.open); <-held }()
		waitFor(t, "the sync call to hold the slot", func() bool { return g.runs.Load() == 1 })
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "gate", Body: []byte(`{}`), Caller: "k", RequestID: "async"})
		if err != nil || refusal != nil {
			t.Fatalf("accepting: %v %+v", err, refusal)
		}
		env := waitStatus(t, r, rec.ID, dispatch.StatusTimeout).View()
		if env.Error == nil || env.Error.Code != tools.CodeQueueFull || !strings.Contains(env.Error.Message, "could not run within") {
			t.Fatalf("ended %+v", env.Error)
		}
	})
}
