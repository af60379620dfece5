package executions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
)

// consumerName is the durable consumer every replica's workers share: the
// queue hands each message to one of them.
const consumerName = "toold-workers"

// run is an execution running on this replica.
type run struct {
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	// msg is the latest delivery: its lease is renewed, it is
	// acknowledged. Nil for a run this replica took on itself when it
	// accepted the call (inline.go): its lease is a timer it sets again,
	// the last one set lease.
	msg   jetstream.Msg
	lease uint64
	// emitted is set once the run emitted output (an event of its own).
	emitted atomic.Bool
}

func (r *run) delivery() jetstream.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

// Start creates the shared consumer and runs the workers until Close.
func (s *Service) Start(ctx context.Context) error {
	if s.st == nil {
		return nil
	}
	cons, err := s.st.JetStream().CreateOrUpdateConsumer(ctx, state.WorkStream, jetstream.ConsumerConfig{
		Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * s.opts.Heartbeat,
		MaxDeliver: -1, MaxAckPending: 100_000, Description: "toold replicas' async execution workers"})
	if err != nil {
		return fmt.Errorf("executions: the work queue's consumer: %w", err)
	}
	for subj, f := range map[string]func(string){state.CancelSubject: s.cancelLocal, state.DoneSubject: s.notify} {
		sub, err := s.st.Conn().Subscribe(subj, func(m *nats.Msg) { f(string(m.Data)) })
		if err != nil {
			return fmt.Errorf("executions: subscribing to %s: %w", subj, err)
		}
		s.subs = append(s.subs, sub)
	}
	wctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if err := s.startTimers(ctx, wctx); err != nil {
		stop()
		return fmt.Errorf("executions: the timers' consumer: %w", err)
	}
	s.startAuditLease(ctx)
	s.wg.Add(1)
	go s.take(wctx, cons, s.opts.Workers, s.handle)
	s.wg.Add(1)
	go s.sweepOrphans(wctx, s.opts.Heartbeat)
	return nil
}

// take hands cons's messages to handle, each on a dispatcher worker (a
// goroutine whose stack is grown already), at most n at a time, while the
// service is not draining. It keeps one pull request open, for as many
// messages as there are free places then: a worker never takes a message
// before it is free for it, as when each worker pulled its own. One
// request, not one per worker, because for every message it delivers the
// server walks the consumer's open requests, checking that each still has
// a subscriber, and each pull made and dropped a subscription of its own:
// with 64 workers that was about a twentieth of a queued call's CPU
// (profile of submit then GET, embedded store).
func (s *Service) take(ctx context.Context, cons jetstream.Consumer, n int, handle func(context.Context, jetstream.Msg)) {
	defer s.wg.Done()
	free := make(chan struct{}, n) // one token a free place
	for range n {
		free <- struct{}{}
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case <-free:
		case <-ctx.Done():
			return
		}
		batch := 1 + takeAll(free, n-1)
		err := s.fetch(ctx, cons, batch, free, handle)
		if err == nil || ctx.Err() != nil || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) ||
			errors.Is(err, context.DeadlineExceeded) {
			backoff = 50 * time.Millisecond
			continue
		}
		select { // the store is down: do not spin
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// takeAll takes up to max tokens that are there now, and says how many.
func takeAll(tokens chan struct{}, max int) int {
	for n := 0; ; n++ {
		if n == max {
			return n
		}
		select {
		case <-tokens:
		default:
			return n
		}
	}
}

// fetch asks cons for up to batch messages, waiting up to 5s for them, and
// starts handle on each as it arrives; every place of batch a message did
// not take goes back to free, and so does each message's once handled.
func (s *Service) fetch(ctx context.Context, cons jetstream.Consumer, batch int, free chan struct{}, handle func(context.Context, jetstream.Msg)) error {
	got := 0
	defer func() {
		for range batch - got {
			free <- struct{}{}
		}
	}()
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msgs, err := cons.Fetch(batch, jetstream.FetchContext(fctx))
	if err != nil {
		return err
	}
	for msg := range msgs.Messages() {
		got++
		if ctx.Err() != nil {
			_ = msg.Nak() // drained between fetch and now: give it to another replica
			free <- struct{}{}
			continue
		}
		s.wg.Add(1)
		s.disp.Go(func() {
			defer s.wg.Done()
			defer func() { free <- struct{}{} }()
			handle(ctx, msg)
		})
	}
	return msgs.Error()
}

// handle decides what a delivery means for its record, and runs it if it
// should run here.
func (s *Service) handle(ctx context.Context, msg jetstream.Msg) {
	w, ok := s.workOf(msg)
	if !ok {
		return
	}
	key := w.Key
	// The common case: the record is still as accepted; claim it at the
	// revision the message carries, without reading it first.
	if meta, err := msg.Metadata(); err == nil && meta.NumDelivered == 1 {
		if r, err := decodeRecord(w.Record); err == nil && r.Status == dispatch.StatusPending && sameStep(w.Step, r.Step) &&
			s.claim(ctx, msg, r, w.Revision) {
			return
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		r, rev, err := s.read(ctx, key)
		if err != nil {
			_ = msg.NakWithDelay(time.Second)
			return
		}
		if r == nil {
			_ = msg.Ack() // expired, never accepted, or unreadable: nothing to do
			return
		}
		if rev < w.Revision {
			// A read behind the message: the record was at w.Revision
			// when the message was written, and revisions only grow. A
			// stream's leader may answer from before it caught up (a new
			// leader after an election, an old one that has not heard of
			// it yet: nats-server's read-after-write ADR guarantees no
			// more); a decision on it could drop the message of a step
			// the read does not show yet. Later.
			_ = msg.NakWithDelay(time.Second)
			return
		}
		if !sameStep(w.Step, r.Step) {
			_ = msg.Ack() // for a step that is over (a wait's timer after its resumption)
			return
		}
		if s.adopt(r.ID, msg) {
			return // already running here: the new delivery carries its lease on
		}
		switch {
		case r.Status.Final():
			_ = msg.Ack()
			return
		case r.Status == dispatch.StatusWaiting:
			s.waited(ctx, msg, r, rev)
			return
		case r.Status == dispatch.StatusRunning && r.CancelRequested:
			s.conclude(ctx, msg, r, rev, dispatch.StatusCancelled, cancelledEnvelope(r, "while its replica was lost"))
			return
		case r.Status == dispatch.StatusRunning && !s.rerunnable(r):
			s.conclude(ctx, msg, r, rev, dispatch.StatusInterrupted, interruptedEnvelope(r))
			return
		}
		if s.claim(ctx, msg, r, rev) {
			return
		}
	}
	_ = msg.NakWithDelay(time.Second)
}

// claim marks the record running here, if it is still at rev, and runs
// it; false means it changed meanwhile (cancelled, taken) or the move is
// not the table's any more (the message then is looked at again), true
// that it runs here, or that the store failed (the message then comes
// back later).
func (s *Service) claim(ctx context.Context, msg jetstream.Msg, r *Record, rev uint64) bool {
	w, err := s.commit(ctx, r, rev, claimed(s.name, time.Now().UTC()), how{})
	if errors.Is(err, state.ErrConflict) || errors.Is(err, errMove) {
		return false
	}
	if err != nil {
		_ = msg.NakWithDelay(time.Second)
		return true
	}
	s.m.executions.WithLabelValues(string(dispatch.StatusRunning)).Inc()
	s.execute(msg, w.rec, w.rev)
	return true
}

// sameStep reports whether a work message is for the record's current
// step (messages and records written before steps existed are step 1).
func sameStep(msgStep, recStep int) bool { return max(msgStep, 1) == max(recStep, 1) }

// allowedFor is the check of an execution's calls run by a worker: its
// key's tools, or its token's issuer's and claims'.
func (s *Service) allowedFor(r *Record) func(string) bool {
	if who := r.Principal; who != nil && who.Kind == auth.KindToken {
		return func(tool string) bool { return s.opts.AllowsToken != nil && s.opts.AllowsToken(who, tool) }
	}
	if s.opts.Allows == nil {
		return nil
	}
	return func(tool string) bool { return s.opts.Allows(r.Caller, tool) }
}

// LineageFor looks up executions of caller for a delegate call (see
// tools.Call.Lineage).
func (s *Service) LineageFor(caller string) func(context.Context, string) (*tools.Lineage, error) {
	if s.st == nil {
		return nil
	}
	return func(ctx context.Context, id string) (*tools.Lineage, error) { return s.Lineage(ctx, caller, id) }
}

// rerunnable: an execution found running on a lost replica runs again
// only when every tool it calls may run again (MayRunAgain), and not
// forever.
func (s *Service) rerunnable(r *Record) bool {
	if r.Attempt >= s.opts.MaxAttempts {
		return false
	}
	if r.Kind == "batch" {
		names := make([]string, len(r.Batch.Calls))
		for i, c := range r.Batch.Calls {
			names[i] = c.Tool
		}
		return MayRunAgain(s.disp.Registry(), names...)
	}
	return MayRunAgain(s.disp.Registry(), r.Tool)
}

// MayRunAgain is the one rule of whether a call whose outcome was lost
// (its replica died while it ran, or its answer could not be kept) may
// run again: when each of its tools is read-only (MCP's readOnlyHint: it
// changes nothing) or idempotent (a second run adds nothing) —
// tools.Effects.Rerunnable. The worker asks it of an execution found
// running on a lost replica, and an Idempotency-Key's retry of a request
// lost with its replica; a tool the registry does not know may not.
func MayRunAgain(reg *registry.Registry, toolNames ...string) bool {
	if reg == nil || len(toolNames) == 0 {
		return false
	}
	for _, name := range toolNames {
		if e, ok := reg.Lookup(name); !ok || !e.Spec.Effects.Rerunnable() {
			return false
		}
	}
	return true
}

func interruptedEnvelope(r *Record) *dispatch.Envelope {
	why := fmt.Sprintf("the replica running it (%s) stopped before it finished, and the tool is neither read-only nor declared idempotent, so it was not run again", r.Replica)
	if r.Attempt > 1 {
		why = fmt.Sprintf("it was started %d times and no replica finished it (the last was %s)", r.Attempt, r.Replica)
	}
	te := tools.Errorf(tools.SystemError, "the execution was interrupted: %s; it may or may not have taken effect", why).
		WithCode(tools.CodeInterrupted).WithSuggestion("check whether its effect happened before submitting it again")
	return dispatch.Failure(r.RequestID, r.Tool, dispatch.StatusInterrupted, te)
}

// adopt hands a new delivery of an execution running here to its run.
func (s *Service) adopt(id string, msg jetstream.Msg) bool {
	s.mu.Lock()
	rn, ok := s.running[id]
	s.mu.Unlock()
	if !ok {
		return false
	}
	rn.mu.Lock()
	rn.msg = msg
	rn.mu.Unlock()
	return true
}

// execute runs a claimed execution through the pipeline, renewing its
// lease, and records the outcome.
func (s *Service) execute(msg jetstream.Msg, r *Record, rev uint64) {
	ctx, rn, done := s.begin(r, msg)
	defer done()
	stopBeat := s.heartbeat(ctx, rn, r)
	defer stopBeat() // after the outcome is written: the lease holds while it is
	s.outcome(ctx, rn, r, rev, s.runStep(ctx, rn, r))
}

// begin registers an execution running here, under a context its
// cancellation (DELETE, a drain) cancels; done unregisters it.
func (s *Service) begin(r *Record, msg jetstream.Msg) (context.Context, *run, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	rn := &run{cancel: cancel, msg: msg}
	s.mu.Lock()
	s.running[r.ID] = rn
	s.mu.Unlock()
	s.m.running.Inc()
	return ctx, rn, func() {
		cancel(nil)
		s.mu.Lock()
		delete(s.running, r.ID)
		idle := s.draining && len(s.running) == 0
		s.mu.Unlock()
		s.m.running.Dec()
		if idle {
			s.closeIdle()
		}
	}
}

// runStep runs the execution's current step through the pipeline, as rn
// (its run here, which learns whether it emitted output).
func (s *Service) runStep(ctx context.Context, rn *run, r *Record) *dispatch.Envelope {
	ctx, span := s.startRun(ctx, r)
	var env *dispatch.Envelope
	if r.Kind == "batch" {
		env = s.batchEnvelope(ctx, r)
	} else {
		req := dispatch.NewRequest(r.Tool, r.Arguments, r.RequestID, dispatch.From{Name: r.Caller, Identity: r.Principal, Allowed: s.allowedFor(r)})
		req.Unwrap, req.Timeout, req.ConfirmToken = true, time.Duration(r.TimeoutMS)*time.Millisecond, r.ConfirmToken
		req.ExecutionID, req.Emit, req.Resume, req.Confirmed, req.Lineage = r.ID, s.emitter(rn, r), r.Resume, r.Confirmed, s.LineageFor(r.Caller)
		req.Via = policy.ViaExecution // a step of an execution, its first or a resumed one
		env = s.disp.Execute(ctx, req)
	}
	endRun(span, env)
	return env
}

// outcome records how a step that ran here ended: it waits, it was
// cancelled or stopped by a drain (an idempotent one goes back to another
// replica at once), or it ended.
func (s *Service) outcome(ctx context.Context, rn *run, r *Record, rev uint64, env *dispatch.Envelope) {
	if env.Status == dispatch.StatusWaiting && ctx.Err() == nil {
		s.pause(context.Background(), rn.delivery(), r, rev, env)
		return
	}
	if env.Status == dispatch.StatusRejected && ctx.Err() == nil && passes(env.Error) {
		s.yield(rn, r, rev, env)
		return
	}
	status := env.Status
	if te, ok := tools.AsError(context.Cause(ctx)); ok && env.Error != nil && env.Error.Code == te.Code {
		switch te.Code {
		case tools.CodeCancelled:
			status = dispatch.StatusCancelled
		case tools.CodeDraining:
			if s.rerunnable(r) {
				s.handOver(rn, r) // another replica runs it again at once
				return
			}
			status, env = dispatch.StatusInterrupted, interruptedEnvelope(r)
		}
	}
	s.settle(context.Background(), rn.delivery(), r, rev, status, env)
	if rn.delivery() == nil {
		s.disarmLease(rn, r)
	}
}

// passes reports whether the pipeline refused a call for a reason that
// passes by itself: an overload (its tool's bulkhead full or its queue
// wait over, a capacity, a caller's rate or share, an open circuit, an
// upstream away) — not a drain, which the drain's own cause handles.
func passes(e *dispatch.ErrorBody) bool {
	return e != nil && e.Type == tools.OverloadError && e.Code != tools.CodeDraining
}

// yield gives back a run the pipeline refused before it ran, for a reason
// that passes: an accepted execution is never refused (issue 38). Its
// record goes back to pending at its step and its delivery back to the
// queue, taken again after the refusal's Retry-After (a second at least,
// a heartbeat at most); a run taken on where it was accepted is queued
// now. Past its own deadline — its timeout, and at least settleBudget,
// from its acceptance — it ends timeout, saying what kept it from
// running. A cancellation asked meanwhile ends it cancelled.
func (s *Service) yield(rn *run, r *Record, rev uint64, env *dispatch.Envelope) {
	ctx, msg := context.Background(), rn.delivery()
	keepLease := false // a run taken on here: its lease brings it back if nothing else will
	defer func() {
		if msg == nil && !keepLease {
			s.disarmLease(rn, r)
		}
	}()
	if time.Since(r.CreatedAt) >= cmp.Or(s.yieldFor, s.settleBudget(r)) {
		s.settle(ctx, msg, r, rev, dispatch.StatusTimeout, notRunEnvelope(r, env))
		return
	}
	w, err := s.commit(ctx, r, rev, yielded(time.Now().UTC()), how{budget: s.settleBudget(r), overwrite: true})
	switch {
	case errors.Is(err, errCancelAsked):
		s.settle(ctx, msg, r, rev, dispatch.StatusCancelled, cancelledEnvelope(r, "before it could run"))
		return
	case errors.Is(err, errFinal):
		if msg != nil {
			_ = msg.Ack()
		}
		return
	case err != nil:
		s.log.Error("executions: a run refused for a moment could not be put back; the queue will bring it back", zap.String("execution_id", r.ID), zap.Error(err))
		keepLease = true
		return
	}
	s.m.executions.WithLabelValues(string(dispatch.StatusPending)).Inc()
	if msg != nil {
		delay := min(max(time.Duration(env.Error.RetryAfterMS)*time.Millisecond, time.Second), s.opts.Heartbeat)
		_ = msg.NakWithDelay(delay)
		return
	}
	if err := s.queue(ctx, w.rec, w.body, w.rev, acceptBudget); err != nil {
		// Its lease is kept: fired, it finds the step pending and queues
		// it (timers.go).
		s.log.Warn("executions: a run refused for a moment could not be queued; its lease queues it", zap.String("execution_id", r.ID), zap.Error(err))
		keepLease = true
	}
}

// notRunEnvelope ends an accepted execution the pipeline kept refusing,
// for reasons that pass, until its deadline.
func notRunEnvelope(r *Record, env *dispatch.Envelope) *dispatch.Envelope {
	te := tools.Errorf(tools.TimeoutError, "the execution could not run within %v of its acceptance: %s", time.Since(r.CreatedAt).Round(time.Second),
		env.Error.Message).WithCode(env.Error.Code).WithSuggestion("submit it again when the tool is less busy")
	return dispatch.Failure(r.RequestID, r.Tool, dispatch.StatusTimeout, te)
}

// emitter publishes a running execution's output as events.
func (s *Service) emitter(rn *run, r *Record) func(tools.Chunk) {
	return func(c tools.Chunk) {
		rn.emitted.Store(true)
		s.rec.Execution(events.Event{Type: events.TypeOutput, ExecutionID: r.ID, RequestID: r.RequestID, Tool: r.Tool,
			Caller: r.Caller, Principal: r.Principal, Stream: c.Stream, Chunk: c.Data})
	}
}

// heartbeat renews the lease every Heartbeat and watches for a
// cancellation the cancel subject did not bring (a replica that was
// disconnected when it was sent).
func (s *Service) heartbeat(ctx context.Context, rn *run, r *Record) (stop func()) {
	hctx, stop := context.WithCancel(ctx)
	go every(hctx, s.opts.Heartbeat, func() {
		s.renew(ctx, rn, r)
		b, _, err := s.st.Executions.Get(ctx, r.key())
		if err != nil {
			return
		}
		if cur, err := decodeRecord(b); err == nil && cur.CancelRequested {
			rn.cancel(errCancelled)
		}
	})
	return stop
}

var errCancelled = tools.Errorf(tools.SystemError, "the execution was cancelled (DELETE /executions/{id}) while it ran").
	WithCode(tools.CodeCancelled).WithSuggestion("submit it again if it is still needed")

// cancelLocal stops an execution if it runs here.
func (s *Service) cancelLocal(id string) {
	s.mu.Lock()
	rn, ok := s.running[id]
	s.mu.Unlock()
	if ok {
		rn.cancel(errCancelled)
	}
}

// settle writes the end of an execution, unless another replica ended it
// first (then this outcome is dropped: one final state), and acknowledges
// the delivery. The store is retried through an outage for settleBudget
// (the outcome exists only here); one that stays away longer leaves the
// message unacknowledged: the queue brings it back, and the record says
// what to do. The record changed under the run (a cancellation asked) does
// not change the outcome: it is written over the new revision (a run the
// request stopped already ended cancelled: see outcome).
func (s *Service) settle(ctx context.Context, msg jetstream.Msg, r *Record, rev uint64, status dispatch.Status, env *dispatch.Envelope) bool {
	ev := ended(status, env, time.Now().UTC())
	deadline := time.Now().Add(s.settleBudget(r))
	s.auditedEnd(ctx, r, &ev, time.Until(deadline))() // before the end it audits (audited.go), unless the lease covers it (recovery.go)
	w, err := s.commit(ctx, r, rev, ev, how{budget: max(time.Until(deadline), acceptBudget), overwrite: true})
	switch {
	case errors.Is(err, errFinal):
		if msg != nil {
			_ = msg.Ack()
		}
		s.log.Warn("executions: another replica ended this execution first; this outcome is dropped",
			zap.String("execution_id", r.ID), zap.String("dropped", string(status)))
		return false
	case err != nil:
		s.log.Error("executions: could not record an execution's end; the queue will bring it back", zap.String("execution_id", r.ID), zap.Error(err))
		return false
	}
	if msg != nil {
		_ = msg.Ack()
	}
	s.ended(w.rec)
	return true
}

// conclude settles an execution whose end no call on this replica
// produced — found running on a lost replica, or its wait expired — and
// leaves its audit record, which the pipeline leaves for a call it ran:
// the replica that ran it may have died before writing one.
func (s *Service) conclude(ctx context.Context, msg jetstream.Msg, r *Record, rev uint64, status dispatch.Status, env *dispatch.Envelope) {
	if !s.settle(ctx, msg, r, rev, status, env) {
		return
	}
	ev := events.Event{Type: events.TypeError, RequestID: r.RequestID, Tool: r.Tool, Caller: r.Caller, Principal: r.Principal,
		ExecutionID: r.ID, Status: string(status)}
	if env.Error != nil {
		ev.ErrorType, ev.ErrorCode = string(env.Error.Type), string(env.Error.Code)
	}
	s.rec.Concluded(ev, r.Arguments)
	// Written after the end it records (an end another replica wrote
	// first is not audited twice): flushed at once, so only a replica
	// killed within a round trip of it loses the record.
	s.auditing(ctx, r.ID, acceptBudget)()
}

// settleBudget is how long an outcome waits for the store: the
// execution's own timeout, and at least half a minute (an election takes
// up to 9s; a node's restart longer).
func (s *Service) settleBudget(r *Record) time.Duration {
	return max(time.Duration(r.TimeoutMS)*time.Millisecond, 30*time.Second)
}

// ended counts and announces a final record: to this replica's waiters
// with the record, to the others' by the done subject.
func (s *Service) ended(r *Record) {
	s.endedUnawaited(r) // first: a read once its waiters are woken finds it kept (recent.go)
	s.wake(r.ID, r)
	_ = s.st.Conn().Publish(state.DoneSubject, []byte(r.ID))
}

// endedUnawaited counts and records a final record nobody can be waiting
// for: a quick call's end written before its caller is answered (inline.go),
// when the id is known to no one else yet — so no done notice, which every
// replica, this one too, would receive and handle for nothing (in a profile
// at eight connections the NATS client's delivery of it alone was ~4 µs of
// a quick call's ~170 µs of toold's CPU, besides the publish and the
// server's routing). A reader that learns the id later finds the record
// ended.
func (s *Service) endedUnawaited(r *Record) {
	s.m.executions.WithLabelValues(string(r.Status)).Inc()
	s.recent.put(r)
	if r.Quiet {
		s.rec.Quiet(r.ID) // its record tells its events
		return
	}
	typ := events.TypeEnd
	if r.Status != dispatch.StatusSuccess {
		typ = events.TypeError
	}
	s.rec.Execution(events.Event{Type: typ, ExecutionID: r.ID, RequestID: r.RequestID, Tool: r.Tool, Caller: r.Caller, Principal: r.Principal,
		Status: string(r.Status), Envelope: json.RawMessage(r.Envelope)})
}

// Drain stops taking work; executions running here go on. Idle is closed
// when none is left.
func (s *Service) Drain() {
	s.mu.Lock()
	already := s.draining
	s.draining = true
	idle := len(s.running) == 0
	s.mu.Unlock()
	if already {
		return
	}
	if s.stop != nil {
		s.stop()
	}
	if idle {
		s.closeIdle()
	}
}

func (s *Service) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.idle:
	default:
		close(s.idle)
	}
}

// Idle is closed once draining with nothing running here.
func (s *Service) Idle() <-chan struct{} { return s.idle }

// Interrupt cancels what still runs here after the drain's grace: an
// idempotent execution goes back to the queue for another replica, any
// other ends interrupted.
func (s *Service) Interrupt(cause *tools.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rn := range s.running {
		rn.cancel(cause)
	}
}

// Close stops the workers and waits for them (after Drain and Idle).
func (s *Service) Close() {
	s.Drain()
	if s.lease.stop != nil {
		s.lease.stop()
	}
	s.wg.Wait()
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
}
