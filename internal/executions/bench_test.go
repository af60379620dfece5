package executions_test

import (
	"context"
	"testing"

	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/diag"
)

// BenchmarkAsyncEcho is one async echo execution from submit to its final
// record on the embedded store: accept (record and queue), a worker's
// claim, the run, the final record, the waiter's wake-up.
func BenchmarkAsyncEcho(b *testing.B) {
	st := statetest.Open(b, nil, "a")
	r := newReplica(b, st, diag.Echo())
	if err := r.svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	body := []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)
	b.ReportAllocs()
	for b.Loop() {
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "echo", Body: body, Caller: "k", RequestID: "r"})
		if err != nil || refusal != nil {
			b.Fatal(err, refusal)
		}
		if got, err := r.svc.Wait(ctx, "k", rec.ID, 5e9); err != nil || !got.Status.Final() {
			b.Fatal(err, got.Status)
		}
	}
}
