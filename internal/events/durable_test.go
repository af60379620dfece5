package events

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// audited reports whether the audit log holds a record of requestID.
func audited(t *testing.T, st *state.Store, requestID string) bool {
	t.Helper()
	found := false
	if err := ReadAudit(context.Background(), st, ID{}, func(_ ID, line []byte) bool {
		found = strings.Contains(string(line), `"request_id":"`+requestID+`"`)
		return !found
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestDurable: Durable returns once the audit records added before it are
// in the store, flushing at once (the tick here is an hour away); it
// gives up when its context ends while the store is down, leaving them
// buffered; with the audit log off it returns at once; once the recorder
// stopped it says the record was not written.
func TestDurable(t *testing.T) {
	end := func(r *Recorder, id string) {
		c := &dispatch.CallInfo{RequestID: id, Tool: "echo", Caller: "k"}
		r.CallStarted(c)
		r.CallEnded(c, &dispatch.Envelope{Status: dispatch.StatusSuccess})
	}
	t.Run("written at once", func(t *testing.T) {
		st := statetest.Open(t, nil, "a")
		r := NewRecorder(Options{Store: st, Audit: true, FlushInterval: time.Hour})
		go r.Run()
		defer r.Close()
		for i := range 3 {
			id := "r" + string(rune('0'+i))
			end(r, id)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := r.Durable(ctx)
			cancel()
			if err != nil || !audited(t, st, id) {
				t.Fatalf("Durable: %v; record of %s in the store: %v", err, id, audited(t, st, id))
			}
		}
	})
	t.Run("events wait for the tick", func(t *testing.T) {
		// A Durable flush writes the audit records only: a step waiting on
		// it races its own record with one write. The events go with the
		// next timed flush, once, and the records are not written twice.
		st := statetest.Open(t, nil, "a")
		r := NewRecorder(Options{Store: st, Audit: true, FlushInterval: time.Hour})
		go r.Run()
		defer r.Close()
		for _, id := range []string{"e0", "e1"} {
			end(r, id)
			if id == "e0" {
				r.Admin("ops", "approve", "exec-1", "admin-0") // a record with no event
			}
			if err := r.Durable(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		r.mu.Lock()
		buffered, left := len(r.pending), auditLeft(r.pending)
		r.mu.Unlock()
		if got := testutil.ToFloat64(r.m.published); got != 0 || buffered != 5 || left {
			t.Fatalf("after Durable: %v events published, %d entries buffered (want 0 and 5), audit records left %v", got, buffered, left)
		}
		if left := r.flush(t.Context()); left != 0 {
			t.Fatalf("%d entries left after the flush", left)
		}
		// One activity event per call (its start and end coalesced); each
		// call audited once.
		if got := testutil.ToFloat64(r.m.published); got != 2 {
			t.Errorf("%v events published by the timed flush, want 2", got)
		}
		if got := testutil.ToFloat64(r.m.audited); got != 3 {
			t.Errorf("%v audit records written, want 3", got)
		}
		for _, id := range []string{"e0", "admin-0", "e1"} {
			if !audited(t, st, id) {
				t.Errorf("no audit record of %s", id)
			}
		}
	})
	t.Run("a large buffer, in blocks", func(t *testing.T) {
		// Records buffered past one message's size (the store away, or a
		// burst between ticks) are written in blocks of maxBatch, as the
		// timed flush writes them, not refused as one message too large.
		st := statetest.Open(t, nil, "a")
		r := NewRecorder(Options{Store: st, Audit: true, FlushInterval: time.Hour, MaxPending: 20 * maxBatch})
		go r.Run()
		defer r.Close()
		const n = 5 * maxBatch
		for i := range n {
			end(r, "big-"+strconv.Itoa(i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Durable(ctx); err != nil {
			t.Fatalf("Durable over %d buffered records: %v", n, err)
		}
		records, blocks := 0, map[uint64]bool{}
		if err := ReadAudit(ctx, st, ID{}, func(id ID, _ []byte) bool {
			records++
			blocks[id.Seq] = true
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if records != n || len(blocks) != n/maxBatch {
			t.Errorf("%d records in %d messages, want %d in %d", records, len(blocks), n, n/maxBatch)
		}
	})
	t.Run("store down", func(t *testing.T) {
		r := NewRecorder(Options{Store: downStore(t, nil), Audit: true, FlushInterval: time.Hour})
		r.publishTimeout = 100 * time.Millisecond
		go r.Run()
		defer r.Close()
		end(r, "down")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := r.Durable(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Durable with the store down: %v, want the context's deadline", err)
		}
		r.mu.Lock()
		left := auditLeft(r.pending)
		r.mu.Unlock()
		if !left {
			t.Error("the audit record left the buffer without being written")
		}
	})
	t.Run("audit off", func(t *testing.T) {
		r := NewRecorder(Options{Store: downStore(t, nil), FlushInterval: time.Hour})
		end(r, "off") // Run is not even started: nothing would flush
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := r.Durable(ctx); err != nil {
			t.Fatalf("Durable with the audit log off: %v", err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		r := NewRecorder(Options{Store: downStore(t, nil), Audit: true, FlushInterval: time.Hour})
		r.publishTimeout, r.closeTimeout = 50*time.Millisecond, 100*time.Millisecond
		go r.Run()
		r.Close()
		end(r, "late")
		if err := r.Durable(context.Background()); !errors.Is(err, errRecorderStopped) {
			t.Fatalf("Durable after Close: %v, want %v", err, errRecorderStopped)
		}
	})
}

// TestAuditedUntil: the watermark a replica's audit lease carries moves
// past a record only once a flush wrote it — by a Durable flush, or a
// timed one — and stands still while the store refuses the records (it
// never claims a record the store does not hold).
func TestAuditedUntil(t *testing.T) {
	end := func(r *Recorder, id string) time.Time {
		at := time.Now()
		c := &dispatch.CallInfo{RequestID: id, Tool: "echo", Caller: "k"}
		r.CallEnded(c, &dispatch.Envelope{Status: dispatch.StatusSuccess})
		return at
	}
	for _, tt := range []struct {
		name  string
		flush func(*Recorder) // writes what is buffered
	}{
		{"a Durable flush", func(r *Recorder) {
			if err := r.Durable(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"a timed flush", func(r *Recorder) {
			if left := r.flush(t.Context()); left != 0 {
				t.Fatalf("%d left", left)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := statetest.Open(t, nil, "a")
			r := NewRecorder(Options{Store: st, Audit: true, FlushInterval: time.Hour})
			go r.Run()
			defer r.Close()
			at := end(r, "w1")
			if got := r.AuditedUntil(); !got.Before(at) {
				t.Fatalf("before any flush: watermark %v, not before the record's %v", got, at)
			}
			tt.flush(r)
			if got := r.AuditedUntil(); got.Before(at) || !audited(t, st, "w1") {
				t.Fatalf("after the flush: watermark %v before the record's %v (record in the store: %v)", got, at, audited(t, st, "w1"))
			}
		})
	}
	t.Run("the store refuses", func(t *testing.T) {
		r := NewRecorder(Options{Store: downStore(t, nil), Audit: true, FlushInterval: time.Hour})
		r.publishTimeout = 50 * time.Millisecond
		before := r.AuditedUntil()
		at := end(r, "down")
		r.flush(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		go r.Run()
		defer r.Close()
		_ = r.Durable(ctx)
		if got := r.AuditedUntil(); !got.Equal(before) || !got.Before(at) {
			t.Fatalf("watermark moved to %v (from %v) with the record of %v refused", got, before, at)
		}
	})
}
