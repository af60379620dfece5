package executions_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/await"
	"github.com/toold/toold/internal/tools/diag"
)

// TestStepAuditedBeforeItsEnd: once an execution's step reads as ended or
// waiting, its audit record is in the store — not in a buffer flushed
// later, which a replica killed at that moment would lose with an
// accepted call's record (the chaos harness found an answered Prefer:
// wait call missing from the audit log). The recorder here flushes only
// when asked, so the record is there only if the step waited for it. The
// replica has no audit lease, as when the store refused to set it: an end
// waits for its record then (with one, see TestLostReplicasEndsAudited).
func TestStepAuditedBeforeItsEnd(t *testing.T) {
	for _, tt := range []struct {
		name   string
		queued bool
		tool   string
		body   string
		wait   time.Duration // Prefer: wait
		want   dispatch.Status
	}{
		{"quick, where accepted", false, "echo", `{"message":"a"}`, 5 * time.Second, dispatch.StatusSuccess},
		{"kept, where accepted", false, "slow", `{"ms":150}`, 5 * time.Second, dispatch.StatusSuccess},
		{"from the queue", true, "echo", `{"message":"b"}`, 0, dispatch.StatusSuccess},
		{"paused, where accepted", false, "request_user_input", `{"prompt":"go on?"}`, 5 * time.Second, dispatch.StatusWaiting},
		{"paused, from the queue", true, "request_user_input", `{"prompt":"go on?"}`, 0, dispatch.StatusWaiting},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := statetest.Open(t, nil, "a")
			ts := append(await.Tools(await.Options{}), diag.Echo(), slow{name: "slow", runs: &atomic.Int64{}})
			r := newReplicaOpts(t, st, replicaOptions{audit: true, queued: tt.queued, flush: time.Hour}, ts...)
			r.svc.WithoutAuditLease()
			r.start(t)
			ctx := context.Background()
			rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: tt.tool, Body: []byte(tt.body), Caller: "k", RequestID: "r", Wait: tt.wait})
			if err != nil || refusal != nil {
				t.Fatalf("submit: %v %+v", err, refusal)
			}
			if rec, err = r.svc.Wait(ctx, "k", rec.ID, 10*time.Second); err != nil || rec.Status != tt.want {
				t.Fatalf("execution %+v (%v), want %s", rec, err, tt.want)
			}
			found := false
			if err := events.ReadAudit(ctx, st, events.ID{}, func(_ events.ID, line []byte) bool {
				found = strings.Contains(string(line), `"execution_id":"`+rec.ID+`"`)
				return !found
			}); err != nil {
				t.Fatal(err)
			}
			if !found {
				t.Errorf("execution %s reads %s, and its step's audit record is not in the store", rec.ID, rec.Status)
			}
		})
	}
}

// TestLostReplicasEndsAudited: with its audit lease set, a replica (B) writes
// an execution's end without waiting for its audit record (the record is
// still in its buffer: this recorder flushes only when asked); the
// replica is then lost (its store connection closed, so its buffer never
// reaches the log and its lease is no longer set), its lease fires on the
// other replica, and that one writes the end's audit record from the
// final record, marked recovered from the lost replica, with the
// arguments' hash the lost replica's own record would have held. A
// waiting step still waits for its record (the recovery reads ends only).
func TestLostReplicasEndsAudited(t *testing.T) {
	for _, tt := range []struct {
		name   string
		queued bool
		tool   string
		body   string
		wait   time.Duration // Prefer: wait
		limit  time.Duration // the call's timeout
		want   dispatch.Status
	}{
		{"quick, where accepted", false, "echo", `{"message":"a"}`, 5 * time.Second, 0, dispatch.StatusSuccess},
		{"kept, where accepted", false, "slow", `{"ms":150}`, 5 * time.Second, 0, dispatch.StatusSuccess},
		{"from the queue", true, "echo", `{"message":"b"}`, 0, 0, dispatch.StatusSuccess},
		{"timed out, where accepted", false, "slow", `{"ms":5000}`, 5 * time.Second, 20 * time.Millisecond, dispatch.StatusTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sa, sb := statetest.OpenPair(t, state.Options{})
			ts := []tools.Tool{diag.Echo(), slow{name: "slow", runs: &atomic.Int64{}}}
			// B is lost: its store connection is not the one that holds
			// the test's server.
			b := newReplicaOpts(t, sb, replicaOptions{audit: true, queued: tt.queued, flush: time.Hour}, ts...)
			a := newReplicaOpts(t, sa, replicaOptions{audit: true, queued: tt.queued}, ts...)
			b.start(t)
			ctx := context.Background()
			rec, refusal, err := b.svc.Submit(ctx, executions.Call{Tool: tt.tool, Body: []byte(tt.body), Caller: "k", RequestID: "r", Wait: tt.wait,
				Timeout: tt.limit})
			if err != nil || refusal != nil {
				t.Fatalf("submit: %v %+v", err, refusal)
			}
			if rec, err = b.svc.Wait(ctx, "k", rec.ID, 10*time.Second); err != nil || rec.Status != tt.want {
				t.Fatalf("execution %+v (%v), want %s", rec, err, tt.want)
			}
			if got := auditOf(t, sa, rec.ID); got != nil {
				t.Fatalf("the end waited for its audit record: %+v", got)
			}
			sb.Close() // replica B is gone, its audit record with it
			a.start(t)
			var got *events.Record
			waitFor(t, "the recovered audit record", func() bool { got = auditOf(t, sa, rec.ID); return got != nil })
			args := events.NewRecorder(events.Options{Store: sa}).ArgsHash(tt.tool, []byte(tt.body))
			if got.RecoveredFrom != "replica-b" || got.Replica != "replica-a" || got.Status != string(tt.want) || got.Tool != tt.tool ||
				got.ArgsSHA256 != args || got.Caller != "k" || got.RequestID != "r" || got.Kind != "call" || got.Action != "execute" {
				t.Errorf("recovered record %+v, want recovered from replica-b, status %s, arguments' hash %s", got, tt.want, args)
			}
			if (tt.want != dispatch.StatusSuccess) != (got.ErrorType != "") {
				t.Errorf("error type %q for %s", got.ErrorType, tt.want)
			}
		})
	}
}

// auditOf is the audit record of execution id's end in the log, or nil.
func auditOf(t *testing.T, st *state.Store, id string) *events.Record {
	t.Helper()
	var found *events.Record
	if err := events.ReadAudit(context.Background(), st, events.ID{}, func(_ events.ID, line []byte) bool {
		var rec events.Record
		if json.Unmarshal(line, &rec) == nil && rec.ExecutionID == id {
			found = &rec
		}
		return found == nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestLiveReplicasLeaseRecoversNothing: a replica's audit lease that fired
// while the replica lived on (the store was away from it for three
// heartbeats, or it was paused) recovers nothing once the replica has set
// its lease again, nor on the replica itself: it flushes its own records,
// and a recovery would write them twice. B's end is unflushed here (its
// recorder flushes only when asked), as a lost replica's would be; once B
// is lost, the same lease recovers it.
func TestLiveReplicasLeaseRecoversNothing(t *testing.T) {
	sa, sb := statetest.OpenPair(t, state.Options{})
	a := newReplicaOpts(t, sa, replicaOptions{audit: true}, diag.Echo())
	b := newReplicaOpts(t, sb, replicaOptions{audit: true, flush: time.Hour}, diag.Echo())
	a.start(t)
	b.start(t)
	ctx := context.Background()
	rec, refusal, err := b.svc.Submit(ctx, executions.Call{Tool: "echo", Body: []byte(`{"message":"a"}`), Caller: "k", RequestID: "r", Wait: 5 * time.Second})
	if err != nil || refusal != nil || rec.Status != dispatch.StatusSuccess {
		t.Fatalf("submit: %+v %v %+v", rec, err, refusal)
	}
	fired := b.svc.AuditLease(time.Now())
	time.Sleep(250 * time.Millisecond) // B sets its lease again meanwhile (every 100ms)
	for _, tt := range []struct {
		name string
		on   *replica
	}{{"on another replica, set again since", a}, {"on the replica itself", b}} {
		if n, err := tt.on.svc.RecoverLease(ctx, fired); n != 0 || err != nil {
			t.Errorf("%s: %d record(s) recovered (%v) for a live replica", tt.name, n, err)
		}
	}
	if got := auditOf(t, sa, rec.ID); got != nil {
		t.Fatalf("a live replica's end recovered: %+v", got)
	}
	sb.Close() // B is lost: its lease, no longer set, fires on A
	var got *events.Record
	waitFor(t, "the recovered audit record", func() bool { got = auditOf(t, sa, rec.ID); return got != nil })
	if got.RecoveredFrom != "replica-b" {
		t.Fatalf("recovered record %+v", got)
	}
}
