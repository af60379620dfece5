package events

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// downStore is a store whose server has gone: its connection is
// reconnecting, so a write waits for its timeout. Its metrics go to reg.
func downStore(t *testing.T, reg prometheus.Registerer) *state.Store {
	t.Helper()
	ctx := context.Background()
	token := statetest.Token()
	up, err := state.Open(ctx, state.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", Name: "server", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(ctx, state.Options{URL: up.ClientURL(), Name: "replica", Registerer: reg, Token: token})
	if err != nil {
		up.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	up.Close()
	deadline := time.Now().Add(10 * time.Second)
	for st.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the store still looks up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return st
}

// started adds n start events, numbered by request id.
func started(r *Recorder, n int) {
	for i := range n {
		r.CallStarted(&dispatch.CallInfo{RequestID: fmt.Sprint(i), Tool: "echo", Caller: "k"})
	}
}

// TestFlushStopsAtFirstFailure: with the store down, a flush of eight
// messages' worth tries one, waits one timeout, and puts everything back
// in order.
func TestFlushStopsAtFirstFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRecorder(Options{Store: downStore(t, reg)})
	r.publishTimeout = 200 * time.Millisecond
	started(r, 8*maxBatch)
	start := time.Now()
	left := r.flush(context.Background())
	took := time.Since(start)
	if left != 8*maxBatch {
		t.Fatalf("%d entries left, want %d", left, 8*maxBatch)
	}
	if n := statetest.Ops(t, reg)["events_publish"]; n != 1 {
		t.Errorf("%d messages tried while the store is down, want 1", n)
	}
	if took > 4*r.publishTimeout {
		t.Errorf("the flush took %v, with a timeout of %v for one message", took, r.publishTimeout)
	}
	for i, it := range r.pending {
		if it.requestID != fmt.Sprint(i) || !it.activity {
			t.Fatalf("entry %d came back as %+v", i, it)
		}
	}
}

// TestCloseIsBounded: Close gives up on a store that is down after its
// bound in all, however much is buffered and whatever flush is under way.
func TestCloseIsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRecorder(Options{Store: downStore(t, nil), FlushInterval: time.Millisecond, Registerer: reg})
	// Each publish would wait 30s for the store; Close must give up after
	// its own bound instead. The check leaves a busy machine's scheduler
	// seconds of slack and still fails for a Close that waits on even one
	// publish (of eight batches).
	r.publishTimeout, r.closeTimeout = 30*time.Second, 200*time.Millisecond
	started(r, 8*maxBatch)
	go r.Run()
	time.Sleep(20 * time.Millisecond) // a flush is under way
	start := time.Now()
	r.Close()
	if took := time.Since(start); took > r.publishTimeout/3 {
		t.Errorf("Close took %v, bound %v", took, r.closeTimeout)
	}
}

// TestAddBoundsPending: while nothing flushes, the buffer stays within
// MaxPending, keeping the newest in order; events go before audit
// records, and every entry dropped is counted.
func TestAddBoundsPending(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRecorder(Options{Store: statetest.Open(t, nil, "a"), Audit: true, MaxPending: 100, Registerer: reg})
	for i := range 1000 {
		c := &dispatch.CallInfo{RequestID: fmt.Sprint(i), Tool: "echo", Caller: "k"}
		r.CallStarted(c)
		r.CallEnded(c, &dispatch.Envelope{Status: "success"})
		if len(r.pending) > 100 {
			t.Fatalf("call %d: %d entries buffered", i, len(r.pending))
		}
	}
	last := r.pending[len(r.pending)-1]
	if last.requestID != "999" || last.typ != TypeEnd {
		t.Errorf("the newest entry was dropped: %+v", last)
	}
	events := testutil.ToFloat64(r.m.dropped.WithLabelValues("event"))
	audits := testutil.ToFloat64(r.m.dropped.WithLabelValues("audit"))
	if int(events)+int(audits)+len(r.pending) != 2000 || audits == 0 || events <= audits {
		t.Errorf("dropped %v events and %v audit records, %d buffered, of 2000", events, audits, len(r.pending))
	}
	key := func(it item) int { // calls in order, a start before its end
		n, _ := strconv.Atoi(it.requestID)
		if it.audit {
			return 2*n + 1
		}
		return 2 * n
	}
	for i := 1; i < len(r.pending); i++ {
		if key(r.pending[i]) <= key(r.pending[i-1]) {
			t.Fatalf("entries out of order: %+v, %+v", r.pending[i-1], r.pending[i])
		}
	}
}

// messages counts the events stream's messages on subject.
func messages(t *testing.T, st *state.Store, subject string) uint64 {
	t.Helper()
	ctx := context.Background()
	s, err := st.JetStream().Stream(ctx, state.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// oversized is an execution's output the store refuses every time (over
// its largest message), while its activity event, without the envelope,
// is small.
func oversized(id string) Event {
	return Event{Type: TypeOutput, ExecutionID: id, Tool: "echo", Chunk: "hi",
		Envelope: []byte(`"` + strings.Repeat("x", 2<<20) + `"`)}
}

// TestRetriesOnlyWhatFailed: when one execution's message fails, neither
// the activity message nor another execution's is sent again.
func TestRetriesOnlyWhatFailed(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := statetest.Open(t, nil, "a")
	r := NewRecorder(Options{Store: st, Registerer: reg})
	r.Execution(oversized("big"))
	r.Execution(Event{Type: TypeEnd, ExecutionID: "small", Tool: "echo", Status: "success"})
	for range 3 {
		if left := r.flush(context.Background()); left != 1 {
			t.Fatalf("%d entries left, want the oversized execution event", left)
		}
	}
	if got := r.pending[0]; got.activity || got.subject != ExecutionSubject("big") {
		t.Errorf("kept for retry: %+v", got)
	}
	for subj, want := range map[string]uint64{ActivitySubject: 1, ExecutionSubject("small"): 1, ExecutionSubject("big"): 0} {
		if n := messages(t, st, subj); n != want {
			t.Errorf("%s: %d messages, want %d", subj, n, want)
		}
	}
	if n := testutil.ToFloat64(r.m.published); n != 2 {
		t.Errorf("%v events counted as written, want 2", n)
	}
}

// TestOversizedDoesNotHoldBack: a message the store refuses for itself
// (too large) stays buffered alone; the batches after it are written.
func TestOversizedDoesNotHoldBack(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := NewRecorder(Options{Store: st})
	r.Execution(oversized("big"))
	started(r, 2*maxBatch)
	if left := r.flush(context.Background()); left != 1 {
		t.Fatalf("%d entries left, want the oversized execution event", left)
	}
	if n := messages(t, st, ActivitySubject); n != 3 {
		t.Errorf("%d activity messages, want 3", n)
	}
}

// TestCoalesced: a call whose start and end are in one flush has one
// activity event, its end, saying when it started; one whose start was
// flushed before it ended keeps both. An async execution's own subject
// keeps its start either way.
func TestCoalesced(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := NewRecorder(Options{Store: st})
	ctx := context.Background()
	env := &dispatch.Envelope{Status: dispatch.StatusSuccess, DurationMS: 1}
	quick := &dispatch.CallInfo{Tool: "echo", RequestID: "quick", Caller: "k", ExecutionID: "ex"}
	slow := &dispatch.CallInfo{Tool: "echo", RequestID: "slow", Caller: "k"}
	r.CallStarted(slow)
	r.flush(ctx)
	r.CallStarted(quick)
	r.CallEnded(quick, env)
	r.CallEnded(slow, env)
	r.flush(ctx)
	var got []string
	ctxT, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	Activity(ctxT, st, Position{FromStart: true}, Filter{}, func(ev Event) bool {
		got = append(got, ev.Type+" "+ev.RequestID+" "+strconv.FormatBool(ev.Coalesced && !ev.Started.IsZero()))
		return len(got) < 3
	})
	want := []string{"start slow false", "end quick true", "end slow false"}
	if !slices.Equal(got, want) {
		t.Errorf("activity: %q, want %q", got, want)
	}
	if n := messages(t, st, ExecutionSubject("ex")); n != 1 {
		t.Errorf("the execution's subject: %d messages, want its start and end in one", n)
	}
}

// TestQuiet: an execution marked quiet has none of its own events
// published that were still buffered (its record tells them); its
// activity events stay. A start flushed before the mark stays published.
func TestQuiet(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := NewRecorder(Options{Store: st})
	ctx := context.Background()
	env := &dispatch.Envelope{Status: dispatch.StatusSuccess, DurationMS: 1}
	call := func(id string) *dispatch.CallInfo {
		return &dispatch.CallInfo{Tool: "echo", RequestID: "r-" + id, Caller: "k", ExecutionID: id}
	}
	quiet, late, loud := call("quiet"), call("late"), call("loud")
	r.CallStarted(late)
	r.flush(ctx)
	for _, c := range []*dispatch.CallInfo{quiet, late, loud} {
		if c != late {
			r.CallStarted(c)
		}
		r.CallEnded(c, env)
		if c == loud {
			r.Execution(Event{Type: TypeEnd, ExecutionID: c.ExecutionID, Tool: "echo", Status: "success"})
		} else {
			r.Quiet(c.ExecutionID)
		}
	}
	r.flush(ctx)
	for id, want := range map[string]uint64{"quiet": 0, "late": 1, "loud": 1} {
		if n := messages(t, st, ExecutionSubject(id)); n != want {
			t.Errorf("%s's subject: %d messages, want %d", id, n, want)
		}
	}
	var ends []string
	ctxT, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	Activity(ctxT, st, Position{FromStart: true}, Filter{}, func(ev Event) bool {
		if ev.Type == TypeEnd {
			ends = append(ends, ev.ExecutionID)
		}
		return len(ends) < 3
	})
	if want := []string{"quiet", "late", "loud"}; !slices.Equal(ends, want) {
		t.Errorf("activity's ends: %q, want %q", ends, want)
	}
	if len(r.pending) != 0 {
		t.Errorf("left buffered: %+v", r.pending)
	}
}
