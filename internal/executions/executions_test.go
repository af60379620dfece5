package executions_test

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
)

// slow sleeps ms milliseconds (or until cancelled) and counts its runs.
type slow struct {
	name string
	idem bool
	// readOnly declares the tool read-only without declaring it
	// idempotent (an MCP server's readOnlyHint alone).
	readOnly bool
	runs     *atomic.Int64
}

func (s slow) Spec() tools.Spec {
	return tools.Spec{Name: s.name, Description: "Sleeps.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"},"pad":{"type":"string"}}}`),
		Effects:    tools.Effects{Idempotent: s.idem, ReadOnly: s.idem || s.readOnly}}
}

func (s slow) Execute(ctx context.Context, c *tools.Call) (any, error) {
	s.runs.Add(1)
	var in struct{ MS int }
	_ = json.Unmarshal(c.Args, &in)
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
		return map[string]int{"slept_ms": in.MS}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// replica is one toold's executions service on its own store connection.
type replica struct {
	svc *executions.Service
	st  *state.Store
	d   *dispatch.Dispatcher
}

func newReplica(t testing.TB, st *state.Store, ts ...tools.Tool) *replica {
	t.Helper()
	return newReplicaWith(t, st, false, ts...)
}

// newReplicaWith builds a replica whose recorder keeps the audit log when
// audit is set.
func newReplicaWith(t testing.TB, st *state.Store, audit bool, ts ...tools.Tool) *replica {
	t.Helper()
	return newReplicaOpts(t, st, replicaOptions{audit: audit}, ts...)
}

// replicaOptions vary a test replica: audit keeps the audit log, queued
// sends every async call through the queue (none runs where accepted),
// flush is the recorder's flush interval (5ms unless set), submitWindow
// the service's SubmitWindow.
type replicaOptions struct {
	audit, queued       bool
	flush, submitWindow time.Duration
}

func newReplicaOpts(t testing.TB, st *state.Store, o replicaOptions, ts ...tools.Tool) *replica {
	t.Helper()
	audit := o.audit
	reg, err := registry.New(registry.Options{}, ts...)
	if err != nil {
		t.Fatal(err)
	}
	san, _ := sanitize.New(sanitize.Config{}, nil)
	rec := events.NewRecorder(events.Options{Store: st, Audit: audit, FlushInterval: cmp.Or(o.flush, 5*time.Millisecond)})
	go rec.Run()
	t.Cleanup(rec.Close)
	d, err := dispatch.New(dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Sanitizer: san, Limiter: limits.New(limits.Options{}),
		Observers: []dispatch.Observer{rec}})
	if err != nil {
		t.Fatal(err)
	}
	eo := executions.Options{Store: st, Dispatcher: d, Recorder: rec, Heartbeat: 100 * time.Millisecond, Workers: 4, SubmitWindow: o.submitWindow}
	if o.queued {
		eo.InlineSlots = -1
	}
	svc, err := executions.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return &replica{svc: svc, st: st, d: d}
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	if err := r.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, r *replica, id string, want dispatch.Status) *executions.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := r.svc.Get(context.Background(), "k", id)
		if err == nil && rec.Status == want {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never reached %s (is %+v, %v)", id, want, rec, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLostReplica: B runs an execution and dies (its connection closes,
// its lease is no longer renewed); A, the only replica left, takes the
// execution back and ends it interrupted, or runs it again when the tool
// is idempotent. B runs it either from the queue (submitted on A) or
// where it was submitted (on B itself, its lease a timer that falls due).
func TestLostReplica(t *testing.T) {
	for _, tt := range []struct {
		name     string
		idem     bool
		readOnly bool
		inline   bool
		want     dispatch.Status
	}{
		{"from the queue, not idempotent: interrupted", false, false, false, dispatch.StatusInterrupted},
		{"from the queue, idempotent: run again", true, false, false, dispatch.StatusSuccess},
		{"from the queue, read-only alone: run again", false, true, false, dispatch.StatusSuccess},
		{"where submitted (its caller waits), not idempotent: interrupted", false, false, true, dispatch.StatusInterrupted},
		{"where submitted, idempotent: run again", true, false, true, dispatch.StatusSuccess},
		{"where submitted, read-only alone: run again", false, true, true, dispatch.StatusSuccess},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runs := &atomic.Int64{}
			tool := slow{name: "slow", idem: tt.idem, readOnly: tt.readOnly, runs: runs}
			sa, sb := statetest.OpenPair(t, state.Options{})
			opts := replicaOptions{queued: !tt.inline}
			a, b := newReplicaOpts(t, sa, opts, tool), newReplicaOpts(t, sb, opts, tool)
			b.start(t)
			on := a
			if tt.inline {
				on = b
			}
			// The caller waits a moment: B, where submitted, runs it.
			rec, refusal, err := on.svc.Submit(context.Background(), executions.Call{Tool: "slow", Body: []byte(`{"ms":1500}`), Caller: "k", RequestID: "r1",
				Wait: 100 * time.Millisecond})
			if err != nil || refusal != nil {
				t.Fatal(err, refusal)
			}
			running := waitStatus(t, a, rec.ID, dispatch.StatusRunning)
			if running.Replica != "replica-b" {
				t.Fatalf("running on %q", running.Replica)
			}
			sb.Close() // replica B is gone
			a.start(t)
			final := waitStatus(t, a, rec.ID, tt.want)
			env := final.View()
			if tt.want == dispatch.StatusInterrupted {
				if !strings.Contains(env.Error.Message, "replica-b") || env.Error.Code != "interrupted" || runs.Load() != 1 {
					t.Errorf("interrupted: %+v, runs %d", env.Error, runs.Load())
				}
			} else if final.Attempt != 2 || final.Replica != "replica-a" || runs.Load() != 2 {
				t.Errorf("re-run: attempt %d on %s, runs %d", final.Attempt, final.Replica, runs.Load())
			}
		})
	}
}

// TestCancelAcrossReplicas: submitted on A, running on B, cancelled from A.
func TestCancelAcrossReplicas(t *testing.T) {
	runs := &atomic.Int64{}
	tool := slow{name: "slow", runs: runs}
	sa, sb := statetest.OpenPair(t, state.Options{})
	a, b := newReplicaOpts(t, sa, replicaOptions{queued: true}, tool), newReplicaOpts(t, sb, replicaOptions{queued: true}, tool)
	b.start(t)
	rec, _, err := a.svc.Submit(context.Background(), executions.Call{Tool: "slow", Body: []byte(`{"ms":10000}`), Caller: "k"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, rec.ID, dispatch.StatusRunning)
	start := time.Now()
	got, err := a.svc.Cancel(context.Background(), "k", rec.ID)
	if err != nil || got.Status != dispatch.StatusCancelled || time.Since(start) > 2*time.Second {
		t.Fatalf("cancel: %+v %v after %v", got, err, time.Since(start))
	}
	if _, err := a.svc.Get(context.Background(), "someone else", rec.ID); err == nil {
		t.Errorf("another caller read the execution")
	}
}

// TestSubmitRefusesWhenStoreDown: nothing is accepted without the store.
func TestSubmitRefusesWhenStoreDown(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st, slow{name: "slow", runs: &atomic.Int64{}})
	st.Close()
	_, _, err := r.svc.Submit(context.Background(), executions.Call{Tool: "slow", Body: []byte(`{}`), Caller: "k"})
	te, ok := tools.AsError(err)
	if !ok || te.Code != "store_unavailable" {
		t.Fatalf("submit with the store down: %v", err)
	}
}

// TestSubmitRefusesWhenStoreFull: a store out of space refuses with 507
// store_full, and what it refused is not there: not listed, and gone from
// the store once the store has room again (here: the operator purges the
// work queue, which takes no space to do).
func TestSubmitRefusesWhenStoreFull(t *testing.T) {
	st, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Name: "full",
		EventsMaxBytes: 1 << 20, AuditMaxBytes: 1 << 20, MaxStore: 2<<20 + 256<<10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	// Through the queue, whose messages keep each call's arguments (a call
	// run where accepted leaves a small final record in its place).
	r := newReplicaOpts(t, st, replicaOptions{queued: true}, slow{name: "slow", runs: &atomic.Int64{}})
	big := []byte(`{"ms":1,"pad":"` + strings.Repeat("x", 60<<10) + `"}`)
	accepted := 0
	for ; accepted < 100; accepted++ {
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "slow", Body: big, Caller: "k"})
		if refusal != nil {
			t.Fatalf("refused: %+v", refusal.Error)
		}
		if err == nil {
			continue
		}
		te, ok := tools.AsError(err)
		if !ok || te.Code != "store_full" {
			t.Fatalf("submit %d into a full store: %v", accepted, err)
		}
		if rec != nil {
			t.Errorf("a refused submit returned a record")
		}
		break
	}
	if accepted == 100 {
		t.Fatal("100 submits of 60 KiB fitted in 256 KiB")
	}
	if page, err := r.svc.List(ctx, "k", executions.Filter{}, "", 100); err != nil || len(page.Executions) != accepted {
		t.Fatalf("%d accepted, %d listed (%v)", accepted, len(page.Executions), err)
	}
	work, err := st.JetStream().Stream(ctx, state.WorkStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := work.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	waitFor(t, "the refused record to leave the store", func() bool {
		keys, err := st.Executions.Keys(ctx, ">")
		return err == nil && len(keys) == accepted
	})
}
