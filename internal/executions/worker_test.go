package executions_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
)

// busy sleeps 200ms and tracks how many of its calls run at once.
type busy struct{ now, most *atomic.Int64 }

func (b busy) Spec() tools.Spec {
	return tools.Spec{Name: "busy", Description: "Sleeps a moment.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (b busy) Execute(ctx context.Context, _ *tools.Call) (any, error) {
	n := b.now.Add(1)
	defer b.now.Add(-1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	select {
	case <-time.After(200 * time.Millisecond):
		return map[string]bool{"ok": true}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestWorkersKeepOnePullOpen: a replica's workers (4 here) keep one pull
// request open on the work queue, not one each — idle, and while some
// run — none while every worker is busy, and run no more than 4 calls at
// once.
func TestWorkersKeepOnePullOpen(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	var now, most atomic.Int64
	r := newReplicaOpts(t, st, replicaOptions{queued: true}, busy{&now, &most})
	r.start(t)
	ctx := context.Background()
	cons, err := st.JetStream().Consumer(ctx, state.WorkStream, "toold-workers")
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		t.Helper()
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ci.NumWaiting
	}
	deadline := time.Now().Add(5 * time.Second)
	for waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := waiting(); n != 1 {
		t.Fatalf("idle: %d pull requests open, want 1", n)
	}
	var ids []string
	for range 6 {
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "busy", Body: []byte(`{}`), Caller: "k", RequestID: "r"})
		if err != nil || refusal != nil {
			t.Fatal(err, refusal)
		}
		ids = append(ids, rec.ID)
	}
	for now.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := waiting(); n != 0 {
		t.Errorf("every worker busy: %d pull requests open, want 0", n)
	}
	for _, id := range ids {
		if got, err := r.svc.WaitFinal(ctx, "k", id, 10*time.Second); err != nil || got.Status != dispatch.StatusSuccess {
			t.Fatalf("%s: %+v %v", id, got, err)
		}
	}
	if m := most.Load(); m != 4 {
		t.Errorf("%d calls ran at once, want the 4 workers'", m)
	}
	deadline = time.Now().Add(5 * time.Second)
	for waiting() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := waiting(); n != 1 {
		t.Errorf("idle again: %d pull requests open, want 1", n)
	}
}
