package executions_test

import (
	"context"
	"testing"
	"time"

	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/diag"
)

// BenchmarkAsyncEcho is one async echo execution from submit to its final
// record on the embedded store, with the audit log off and on: submitted
// then waited for (accepted: record and queue; a worker's claim, the run,
// the final record, the waiter's wake-up), and in one request (Prefer:
// wait: run where accepted, one write).
func BenchmarkAsyncEcho(b *testing.B) {
	body := []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)
	for _, audit := range []bool{false, true} {
		for _, form := range []struct {
			name string
			wait time.Duration
		}{{"submit-then-wait", 0}, {"one-request", 5 * time.Second}} {
			name := form.name + "/audit-off"
			if audit {
				name = form.name + "/audit-on"
			}
			b.Run(name, func(b *testing.B) {
				st := statetest.Open(b, nil, "a")
				r := newReplicaWith(b, st, audit, diag.Echo())
				if err := r.svc.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "echo", Body: body, Caller: "k", RequestID: "r", Wait: form.wait})
					if err != nil || refusal != nil {
						b.Fatal(err, refusal)
					}
					if got, err := r.svc.Wait(ctx, "k", rec.ID, 5*time.Second); err != nil || !got.Status.Final() {
						b.Fatal(err, got.Status)
					}
				}
			})
		}
	}
}
