package executions_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/await"
	"github.com/toold/toold/internal/tools/diag"
)

// TestStepAuditedBeforeItsEnd: once an execution's step reads as ended or
// waiting, its audit record is in the store — not in a buffer flushed
// later, which a replica killed at that moment would lose with an
// accepted call's record (the chaos harness found an answered Prefer:
// wait call missing from the audit log). The recorder here flushes only
// when asked, so the record is there only if the step waited for it.
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
