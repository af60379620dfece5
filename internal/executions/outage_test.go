package executions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/await"
)

// outageReplica is one replica on a real nats-server process, so the
// test can take the store away (stop the server) and give it back.
func outageReplica(t *testing.T, ts ...tools.Tool) (*statetest.Server, *replica) {
	t.Helper()
	ns := statetest.StartServer(t)
	st, err := state.Open(context.Background(), state.Options{URL: ns.URL, Name: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newReplica(t, st, ts...)
	r.start(t)
	return ns, r
}

// TestWaitRidesOutAStoreOutage: a client waiting for an accepted
// execution's end (GET ?wait=, Prefer: wait=) while the store is away for
// a moment — a NATS restart, an election — gets the execution's end, not
// 503 store_unavailable: the chaos harness's first finding (an accepted
// execution read as "rejected, store_unavailable" mid-election).
func TestWaitRidesOutAStoreOutage(t *testing.T) {
	ns, r := outageReplica(t, slow{name: "slow", idem: true, runs: &atomic.Int64{}})
	ctx := context.Background()
	rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "slow", Body: []byte(`{"ms":1500}`), Caller: "k", RequestID: "r"})
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	waitStatus(t, r, rec.ID, dispatch.StatusRunning)
	ns.Stop()
	type result struct {
		rec *executions.Record
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := r.svc.WaitFinal(ctx, "k", rec.ID, 20*time.Second)
		done <- result{got, err}
	}()
	time.Sleep(6 * time.Second) // the outage: longer than a request waits for its answer (5s)
	ns.Start()
	if got := <-done; got.err != nil || got.rec.Status != dispatch.StatusSuccess {
		t.Fatalf("waiting through the outage: %v %+v", got.err, got.rec)
	}
}

// human waits for a person's approval before it runs.
type human struct{ runs *atomic.Int64 }

func (human) Spec() tools.Spec {
	return tools.Spec{Name: "human", Description: "Needs a person.", Category: tools.Direct, Confirmation: tools.ConfirmHuman,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (h human) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]int64{"run": h.runs.Add(1)}, nil
}

// TestApprovalIndexedThroughAnOutage: a call that waits for approval is
// listed in the waits index, which is how an approver finds and decides
// it. The index's write failing for a moment used to leave the call
// waiting where no approver could reach it (404 no_approval) until its
// wait expired: an approval lost. Here the index's bucket is away for a
// moment, on both paths to a wait — a sync call parked, an async one
// paused by a worker — and each call must still be decided.
func TestApprovalIndexedThroughAnOutage(t *testing.T) {
	runs := &atomic.Int64{}
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st, human{runs})
	r.start(t)
	ctx := context.Background()
	js := st.JetStream()
	waits, err := js.KeyValue(ctx, state.WaitsBucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := waits.(interface {
		Status(context.Context) (jetstream.KeyValueStatus, error)
	})
	status, err := cfg.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// outage takes the bucket away while during runs, and gives it back
	// after 700ms.
	outage := func(during func()) {
		t.Helper()
		if err := js.DeleteKeyValue(ctx, state.WaitsBucket); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); during() }()
		time.Sleep(700 * time.Millisecond)
		if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: state.WaitsBucket, TTL: status.TTL(),
			History: 1, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	decide := func(id string) {
		t.Helper()
		if _, err := r.svc.Decide(ctx, id, executions.Decision{Approve: true, By: "approver"}); err != nil {
			t.Fatalf("deciding %s: %v", id, err)
		}
		if got, err := r.svc.WaitFinal(ctx, "k", id, 10*time.Second); err != nil || got.Status != dispatch.StatusSuccess {
			t.Fatalf("the approved call %s: %v %+v", id, err, got)
		}
	}
	var id string
	var failed error
	outage(func() {
		req := &dispatch.Request{Tool: "human", Body: []byte(`{}`), RequestID: "r", Caller: "k"}
		env := r.d.Execute(ctx, req)
		if env.Status != dispatch.StatusWaiting {
			failed = errors.New("a sync call did not wait: " + string(env.Status))
			return
		}
		parked, err := r.svc.Park(ctx, req, env)
		if failed = err; err == nil {
			id = parked.ID
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	decide(id)
	outage(func() {
		rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "human", Body: []byte(`{}`), Caller: "k", RequestID: "r2"})
		if err != nil || refusal != nil {
			failed = fmt.Errorf("submit: %v %v", err, refusal)
			return
		}
		id = rec.ID
	})
	if failed != nil {
		t.Fatal(failed)
	}
	waitStatus(t, r, id, dispatch.StatusWaiting)
	decide(id)
	if runs.Load() != 2 {
		t.Errorf("the two approved calls ran %d times", runs.Load())
	}
}

// TestInterruptedIsAudited: an execution whose replica died mid-run has
// no audit record of that run (the pipeline writes one when a call ends,
// and this one never ended there); the replica that finds it and ends it
// interrupted leaves one, so the audit log holds every accepted call.
// The chaos harness found such executions missing from the log.
func TestInterruptedIsAudited(t *testing.T) {
	tool := slow{name: "slow", runs: &atomic.Int64{}}
	sa, sb := statetest.OpenPair(t, state.Options{})
	o := replicaOptions{audit: true, queued: true} // B runs it, from the queue
	a, b := newReplicaOpts(t, sa, o, tool), newReplicaOpts(t, sb, o, tool)
	b.start(t)
	ctx := context.Background()
	rec, refusal, err := a.svc.Submit(ctx, executions.Call{Tool: "slow", Body: []byte(`{"ms":2000}`), Caller: "k", RequestID: "r1"})
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	waitStatus(t, a, rec.ID, dispatch.StatusRunning)
	sb.Close() // replica B dies mid-run
	a.start(t)
	waitStatus(t, a, rec.ID, dispatch.StatusInterrupted)
	waitFor(t, "the interrupted execution's audit record", func() bool {
		found := false
		_ = events.ReadAudit(ctx, sa, events.ID{}, func(_ events.ID, line []byte) bool {
			found = strings.Contains(string(line), `"execution_id":"`+rec.ID+`"`) && strings.Contains(string(line), `"status":"interrupted"`)
			return !found
		})
		return found
	})
}

// TestResumeRidesOutAnElection: a resumption's write that meets the
// store away (a stream leader killed: an election takes 4 to 9 s) is
// retried within the step's budget, not refused after a new call's 2 s:
// once its first attempt may have landed, "nothing was accepted" cannot be
// told, and the chaos harness found answered executions left pending with
// no message to run them. The execution ends with its answer.
func TestResumeRidesOutAnElection(t *testing.T) {
	ns, r := outageReplica(t, await.Tools(await.Options{})...)
	ctx := context.Background()
	rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "request_user_input", Body: []byte(`{"prompt":"go on?"}`), Caller: "k", RequestID: "r"})
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	waitStatus(t, r, rec.ID, dispatch.StatusWaiting)
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- r.svc.ResumeAcross(ctx, "k", rec.ID, json.RawMessage(`"yes"`), func() { ns.Stop(); close(stopped) })
	}()
	<-stopped
	time.Sleep(3 * time.Second) // the election: longer than a new call waits (2 s)
	ns.Start()
	if err := <-done; err != nil {
		t.Fatalf("the resumption across the outage: %v", err)
	}
	got, err := r.svc.WaitFinal(ctx, "k", rec.ID, 20*time.Second)
	if err != nil || got.Status != dispatch.StatusSuccess || !strings.Contains(string(got.Envelope), `"answer":"yes"`) {
		t.Fatalf("the resumed execution: %v %+v", err, got)
	}
}

// TestReadRidesOutAStoreOutage: GET /executions/{id} (Wait), with or
// without ?wait=, reads the record through a store away for a moment, as
// a wait does, and is refused only once no read came through within its
// budget. A read that does not wait used to be refused at the store's
// first refusal: issue 38's overlapping faults had a client reading
// executions that had ended success until final told "rejected,
// store_unavailable" while a NATS node caught up and another died. (The
// CI-sized chaos run had found the same of a GET ?wait=15s answered 503
// after the 5 s of its first read, during a NATS node's kill.)
func TestReadRidesOutAStoreOutage(t *testing.T) {
	ns, r := outageReplica(t, slow{name: "slow", idem: true, runs: &atomic.Int64{}})
	ctx := context.Background()
	rec, refusal, err := r.svc.Submit(ctx, executions.Call{Tool: "slow", Body: []byte(`{"ms":100}`), Caller: "k", RequestID: "r"})
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	waitStatus(t, r, rec.ID, dispatch.StatusSuccess)
	// The replica that ended it answers from what it wrote (recent.go);
	// another reads the store.
	other := newReplica(t, r.st, slow{name: "slow", idem: true, runs: &atomic.Int64{}})
	ns.Stop()
	if got, err := r.svc.Wait(ctx, "k", rec.ID, 0); err != nil || got.Status != dispatch.StatusSuccess {
		t.Fatalf("the replica that ended it, with the store away: %+v %v", got, err)
	}
	other.svc.ReadBudget(time.Second)
	start := time.Now()
	if _, err := other.svc.Wait(ctx, "k", rec.ID, 0); err == nil || time.Since(start) < time.Second {
		t.Fatalf("a read whose store stayed away past its budget: %v after %v", err, time.Since(start))
	}
	other.svc.ReadBudget(20 * time.Second)
	for _, wait := range []time.Duration{0, time.Second} {
		t.Run(fmt.Sprintf("wait %v", wait), func(t *testing.T) {
			ns.Stop()
			done := make(chan error, 1)
			go func() {
				got, err := other.svc.Wait(ctx, "k", rec.ID, wait)
				if err == nil && got.Status != dispatch.StatusSuccess {
					err = fmt.Errorf("read %s", got.Status)
				}
				done <- err
			}()
			time.Sleep(6 * time.Second) // longer than a request waits for its answer (5s)
			ns.Start()
			if err := <-done; err != nil {
				t.Fatalf("a read across the outage: %v", err)
			}
		})
	}
}

// TestRetryStoreBoundsEachAttempt: an attempt whose answer never comes (a
// write that reached a node as it died) is cut at its own bound and tried
// again, not waited for through the whole budget. CI saw
// TestResumeRidesOutAnElection's resumption wait out its 30 s on one
// attempt across a 3 s restart.
func TestRetryStoreBoundsEachAttempt(t *testing.T) {
	_, r := outageReplica(t)
	lost := func(ctx context.Context) error { // as the store reports a request's deadline
		<-ctx.Done()
		return fmt.Errorf("%w: %w", state.ErrUnavailable, ctx.Err())
	}
	for _, tt := range []struct {
		name     string
		op       func(attempt int, ctx context.Context) error
		err      error
		attempts func(int) bool
	}{
		{"answer lost once", func(n int, ctx context.Context) error {
			if n == 1 {
				return lost(ctx)
			}
			return nil
		}, nil, func(n int) bool { return n == 2 }},
		{"never answered", func(_ int, ctx context.Context) error { return lost(ctx) }, state.ErrUnavailable,
			func(n int) bool { return n >= 3 }},
		{"a conflict is an answer", func(int, context.Context) error { return state.ErrConflict }, state.ErrConflict,
			func(n int) bool { return n == 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := r.svc.RetryStore(context.Background(), 3*time.Second, 300*time.Millisecond, func(ctx context.Context) error {
				n++
				return tt.op(n, ctx)
			})
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) || !tt.attempts(n) {
				t.Fatalf("err %v after %d attempts; want %v", err, n, tt.err)
			}
		})
	}
}

// TestStaleReadKeepsTheDelivery: a delivery whose read of its record is
// behind it does not decide on it — it comes back later rather than being
// acknowledged as a step that is over. A work message knows the revision it
// was written at; a timer (a wait's expiry, a step's guard) knows its step,
// set only once the record reached it. (nats-server does not promise
// read-after-write from a stream's leader: a stream leader may answer from
// before it caught up. A guard — the chaos finding it was first taken for
// is TestConflictUnreadIsNotAnAnswer's.) Each row sends, for a record that
// waits at step 1, a delivery ahead of it.
func TestStaleReadKeepsTheDelivery(t *testing.T) {
	timer := func(data string) func(context.Context, *replica, string) error {
		return func(ctx context.Context, r *replica, id string) error {
			_, err := r.st.Schedule(ctx, id+"-ahead", time.Now(), fmt.Appendf(nil, data, executions.Key("k", id)))
			return err
		}
	}
	for _, tc := range []struct {
		name             string
		stream, consumer string
		send             func(ctx context.Context, r *replica, id string) error
	}{
		{"a work message written at a revision the store has not reached", state.WorkStream, executions.WorkConsumer,
			func(ctx context.Context, r *replica, id string) error {
				return r.svc.QueueAhead(ctx, "k", id, 1<<40, 2)
			}},
		{"a wait's timer for step 2", state.TimersStream, executions.TimerConsumer, timer(`{"key":%q,"step":2}`)},
		{"the guard of step 3", state.TimersStream, executions.TimerConsumer, timer(`{"key":%q,"step":3,"guard":true}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statetest.Open(t, nil, "a")
			r := newReplica(t, st, await.Tools(await.Options{})...)
			r.start(t)
			ctx := context.Background()
			rec := submit(t, r.svc, "request_user_input", []byte(`{"prompt":"go on?"}`))
			waitStatus(t, r, rec.ID, dispatch.StatusWaiting)
			cons, err := st.JetStream().Consumer(ctx, tc.stream, tc.consumer)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.send(ctx, r, rec.ID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the delivery made again", func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.NumRedelivered >= 1
			})
			if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 1 {
				t.Fatalf("the delivery ahead of the read: %+v %v; want it kept, unacknowledged", info, err)
			}
			if got, err := r.svc.Get(ctx, "k", rec.ID); err != nil || got.Status != dispatch.StatusWaiting {
				t.Fatalf("the execution: %+v %v", got, err)
			}
		})
	}
}

// TestConflictUnreadIsNotAnAnswer: a retried write that conflicts is taken
// as landed when the record reads as it wrote it, as refused when it reads
// otherwise — and as the store being away when it cannot be read: the
// conflict may be the first attempt itself, proposed to a stream leader
// that lost its quorum and committed once the quorum is back. The chaos
// harness's quorum loss found a resumption answered 503 (its retry's
// conflict taken as another writer's) whose write landed 20 s later, its
// step pending with no message to run it.
func TestConflictUnreadIsNotAnAnswer(t *testing.T) {
	ns, r := outageReplica(t, slow{name: "slow", idem: true, runs: &atomic.Int64{}})
	ctx := context.Background()
	rec := submit(t, r.svc, "slow", []byte(`{"ms":1}`))
	waitStatus(t, r, rec.ID, dispatch.StatusSuccess)
	key := executions.Key("k", rec.ID)
	stored, _, err := r.st.Executions.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	conflict := fmt.Errorf("%w: wrong last sequence", state.ErrConflict)
	if _, err := r.svc.Landed(ctx, key, stored, conflict); err != nil {
		t.Fatalf("the record as written: %v; want it landed", err)
	}
	if _, err := r.svc.Landed(ctx, key, []byte(`{"other":true}`), conflict); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("another writer's record: %v; want the conflict", err)
	}
	ns.Stop()
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := r.svc.Landed(tctx, key, []byte(`{"other":true}`), conflict); errors.Is(err, state.ErrConflict) || !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("with the store away: %v; want it unavailable, not the conflict", err)
	}
}

// TestGuardQueuesAStepItsWriterLeft: a replica killed between a
// resumption's write and its queue message (the chaos harness's replica
// kill, 0.3 ms after a step's write) leaves the step to its guard, which
// fires on another replica and queues it; the execution ends with its
// answer. One killed after the message too leaves the guard to fire on a
// step queued already (the workers busy, it waits in the queue): its
// message, under the same id, is dropped by the stream, so the step is
// queued once and runs once.
func TestGuardQueuesAStepItsWriterLeft(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	runs := &atomic.Int64{}
	counted, busy := countingAsk{runs: runs}, slow{name: "slow", runs: &atomic.Int64{}}
	dying := newReplica(t, st, counted, busy) // never started: it dies after the write
	other := newReplica(t, st, counted, busy)
	other.start(t)
	ctx := context.Background()
	work, err := st.JetStream().Stream(ctx, state.WorkStream)
	if err != nil {
		t.Fatal(err)
	}
	lastSeq := func() uint64 {
		t.Helper()
		info, err := work.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	for _, tt := range []struct {
		name      string
		published bool
	}{{"before the message", false}, {"after the message", true}} {
		t.Run(tt.name, func(t *testing.T) {
			runs.Store(0)
			rec := submit(t, other.svc, "ask", []byte(`{"prompt":"go on?"}`))
			waitStatus(t, other, rec.ID, dispatch.StatusWaiting)
			for range 4 { // every worker busy past the guard's due time: the step waits in the queue
				submit(t, other.svc, "slow", []byte(`{"ms":2500}`))
			}
			before := lastSeq()
			if err := dying.svc.ResumeDying(ctx, "k", rec.ID, json.RawMessage(`"yes"`), tt.published); err != nil {
				t.Fatal(err)
			}
			got, err := other.svc.WaitFinal(ctx, "k", rec.ID, 10*time.Second)
			if err != nil || got.Status != dispatch.StatusSuccess || !strings.Contains(string(got.Envelope), `"yes"`) {
				t.Fatalf("the execution: %v %+v", err, got)
			}
			time.Sleep(2 * time.Second) // past the guard's due time (three 100ms heartbeats, in whole seconds)
			if n, queued := runs.Load(), lastSeq()-before; n != 2 || queued != 1 {
				t.Fatalf("the tool ran %d times, the step was queued %d times; want 2 runs (the ask, then its resumption) and 1 message", n, queued)
			}
		})
	}
}

// countingAsk pauses for an answer, then returns it, counting each run.
type countingAsk struct{ runs *atomic.Int64 }

func (a countingAsk) Spec() tools.Spec {
	return tools.Spec{Name: "ask", Description: "Asks.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}}}`)}
}

func (a countingAsk) Execute(ctx context.Context, c *tools.Call) (any, error) {
	a.runs.Add(1)
	if c.Resume != nil {
		return map[string]json.RawMessage{"answer": c.Resume.Answer}, nil
	}
	return nil, &tools.Pause{Input: &tools.InputRequest{Prompt: "go on?"}}
}
