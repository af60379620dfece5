package executions_test

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/await"
	"github.com/toold/toold/internal/tools/diag"
)

// BenchmarkPauseResume measures what a pause-and-resume round trip adds to
// an execution, on the embedded store: each iteration runs, side by side,
// an async echo (submit to final) and an async request_user_input that
// pauses, is answered and ends (submit, waiting, resume, final). It reports
// the p50 of each and the p50 of what the round trip adds (the target is
// under 2 ms).
func BenchmarkPauseResume(b *testing.B) {
	st := statetest.Open(b, nil, "a")
	r := newReplica(b, st, append(await.Tools(await.Options{}), diag.Echo())...)
	ctx := context.Background()
	if err := r.svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	echo := []byte(`{"message":"may I go on?"}`)
	ask := []byte(`{"prompt":"may I go on?"}`)
	var plain, paused []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		rec := submit(b, r.svc, "echo", echo)
		final(b, r.svc, rec.ID)
		t1 := time.Now()
		rec = submit(b, r.svc, "request_user_input", ask)
		if got, err := r.svc.Wait(ctx, "k", rec.ID, 5*time.Second); err != nil || got.Status != dispatch.StatusWaiting {
			b.Fatalf("not waiting: %v %+v", err, got)
		}
		if _, err := r.svc.Resume(ctx, "k", rec.ID, "input", json.RawMessage(`"yes"`)); err != nil {
			b.Fatal(err)
		}
		final(b, r.svc, rec.ID)
		plain, paused = append(plain, t1.Sub(t0)), append(paused, time.Since(t1))
	}
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	pp, pr := p50(plain), p50(paused)
	b.ReportMetric(pp, "plain-p50-ms")
	b.ReportMetric(pr, "paused-p50-ms")
	b.ReportMetric(pr-pp, "added-p50-ms")
}

// BenchmarkThousandWaiting parks 1,000 executions at once and reports what
// they cost while they wait: the resident set and live heap they add (the
// target is under +30 MiB) and the goroutines they add (the target is none
// each: a waiting execution is state in the store, not a parked goroutine).
// Each iteration cancels its executions before the next; ns/op is the
// time to park and reach 1,000 waits.
func BenchmarkThousandWaiting(b *testing.B) {
	const n = 1000
	st := statetest.Open(b, nil, "a")
	r := newReplica(b, st, await.Tools(await.Options{})...)
	ctx := context.Background()
	if err := r.svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	// Warm up: one execution through every path, so what is measured is
	// the executions, not the first use of the store.
	warm := submit(b, r.svc, "request_user_input", []byte(`{"prompt":"warm?"}`))
	r.svc.Wait(ctx, "k", warm.ID, 5*time.Second)
	r.svc.Cancel(ctx, "k", warm.ID)
	var rss, heap, gor float64
	for b.Loop() {
		b.StopTimer() // measuring the footprint (a settle, a collection) is not the work
		rss0, heap0, g0 := footprint()
		b.StartTimer()
		ids := make([]string, 0, n)
		for i := range n {
			rec := submit(b, r.svc, "request_user_input", []byte(`{"prompt":"question `+strconv.Itoa(i)+`: may I go on?"}`))
			ids = append(ids, rec.ID)
		}
		for _, id := range ids {
			if got, err := r.svc.Wait(ctx, "k", id, 30*time.Second); err != nil || got.Status != dispatch.StatusWaiting {
				b.Fatalf("not waiting: %v %+v", err, got)
			}
		}
		b.StopTimer()
		rss1, heap1, g1 := footprint()
		rss, heap, gor = max(rss, rss1-rss0), max(heap, heap1-heap0), max(gor, float64(g1-g0))
		for _, id := range ids {
			if _, err := r.svc.Cancel(ctx, "k", id); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(rss, "rss-added-MiB")
	b.ReportMetric(heap, "heap-added-MiB")
	b.ReportMetric(gor, "goroutines-added")
}

// submit submits an async call of tool for caller "k", which must be
// accepted.
func submit(b testing.TB, svc *executions.Service, tool string, body []byte) *executions.Record {
	b.Helper()
	rec, refusal, err := svc.Submit(context.Background(), executions.Call{Tool: tool, Body: body, Caller: "k", RequestID: "r"})
	if err != nil || refusal != nil {
		b.Fatal(err, refusal)
	}
	return rec
}

func final(b *testing.B, svc *executions.Service, id string) {
	b.Helper()
	if got, err := svc.WaitFinal(context.Background(), "k", id, 5*time.Second); err != nil || got.Status != dispatch.StatusSuccess {
		b.Fatalf("not final: %v %+v", err, got)
	}
}

// footprint is the process's resident set and live heap in MiB, after a
// collection, and its goroutine count, after the workers settle.
func footprint() (rss, heap float64, goroutines int) {
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				rss = kb / 1024
			}
		}
	}
	return rss, float64(m.HeapAlloc) / (1 << 20), runtime.NumGoroutine()
}
