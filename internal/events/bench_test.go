package events_test

import (
	"context"
	"testing"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/diag"
)

// BenchmarkRecorder is the pipeline's echo call without and with the
// recorder (activity events and audit records, flushed in the
// background): run with -cpu 1 so the flusher's work is charged to the
// calls, as on a saturated core. The last flush (Close) is timed too, so
// every call's events and record are paid for.
func BenchmarkRecorder(b *testing.B) {
	unsorted := []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)
	// The same arguments as a client that sorts its names sends them,
	// canonical already: the audit record's hash skips writing them again.
	sorted := []byte(`{"data":{"n":1,"tags":["a","b"]},"message":"hello, toold"}`)
	for _, bb := range []struct {
		name string
		on   bool
		body []byte
	}{{"off", false, unsorted}, {"on", true, unsorted}, {"on-sorted-args", true, sorted}} {
		on, body := bb.on, bb.body
		b.Run(bb.name, func(b *testing.B) {
			reg, _ := registry.New(registry.Options{}, diag.Echo())
			san, _ := sanitize.New(sanitize.Config{}, nil)
			var obs []dispatch.Observer
			var rec *events.Recorder
			if on {
				st := statetest.Open(b, nil, "bench")
				rec = events.NewRecorder(events.Options{Store: st, Audit: true, MaxPending: 1 << 22})
				go rec.Run()
				b.Cleanup(rec.Close)
				obs = append(obs, rec)
			}
			d, _ := dispatch.New(dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Sanitizer: san, Limiter: limits.New(limits.Options{}),
				Observers: obs})
			ctx := context.Background()
			b.ReportAllocs()
			// A b.N loop, not b.Loop: b.Loop stops the timer when it ends,
			// so the last flush after it would not be timed.
			b.ResetTimer()
			for range b.N {
				if env := d.Execute(ctx, &dispatch.Request{Tool: "echo", Body: body, RequestID: "bench", Caller: "k"}); !env.Success {
					b.Fatal(env.Error)
				}
			}
			if rec != nil {
				rec.Close() // publishes what is left: the last flush is part of the cost
			}
		})
	}
}
