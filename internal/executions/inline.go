package executions

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// An async call whose caller waits for it (Prefer: wait) is run by the
// replica that accepts it, at once, when one of its slots (InlineSlots) is
// free: no trip through the queue to whichever worker takes it, no claim.
// What makes it durable is written once, when needed:
//
//   - a call that ends within quickWindow is written once, ended: one
//     write for the whole call (before it ends there is nothing to lose:
//     the caller has no answer yet);
//   - one still running then is written as running here before its
//     caller is answered, and its lease is a timer (timers.go) this
//     replica sets again every heartbeat, due three heartbeats on: a
//     replica that dies stops setting it, the timer fires on another
//     replica, and the run goes to the queue, whose worker finds it running
//     on a lost replica, as a redelivery would have it (interrupted, or
//     run again when idempotent). Its end is written when it ends, as a
//     worker's is.
//
// A call nobody waits for (a submit without Prefer: wait) runs here too
// when its tool is quick here (its calls' mean run time on this replica,
// as its bulkhead keeps it, is a fraction of submitWindow): its answer (202) waits up to submitWindow for its end, so
// such a call that ends by then is kept with one write and its GET is
// answered from what this replica wrote (recent.go). Any other goes through
// the queue, whose record and message cost less than a record and a lease
// timer for a call that runs on (measured side by side with a 20ms sleep:
// 354-434µs to the 202 through the queue, against 423-694µs run here, p90
// 0.7-0.9 against 1.8-2.1ms; the queue kept twice the submits a second).

// quickWindow is how long a call whose caller waits for it may run before
// it is made durable: one that ends within it costs one write.
const quickWindow = 50 * time.Millisecond

// submitWindow is quickWindow for a call nobody waits for, by default
// (Options.SubmitWindow): the longest its 202 waits. Its tool runs in a
// quarter of it here, or it goes through the queue. Five milliseconds
// take in read_file, list_files and grep on small inputs, not only echo
// (measured with read_file submitted then read at one connection: p50
// 0.83-1.16ms with 5ms, 1.39-1.46ms with 1ms, where it was queued, and
// 1.31-1.74ms before; the 202 of a call that runs past it is late by 5ms).
const submitWindow = 5 * time.Millisecond

// inlineRun is a call running where it was accepted, before and after
// the accepting request decided how it is kept.
type inlineRun struct {
	ended   chan struct{} // closed when the call ended; env is its envelope
	env     *dispatch.Envelope
	decided chan struct{} // closed when the request decided: kept or not
	kept    bool          // its record is written, running here, at rev
	rev     uint64
}

// submitInline runs r's call here at once if a slot is free (false
// otherwise: the queue takes it). It returns the record the caller is
// answered with; or, for a call that ran but that the store could not
// keep, the envelope it ended with, answered as a synchronous call's; or
// the store's refusal of a call that did not run.
func (s *Service) submitInline(ctx context.Context, r *Record, wait time.Duration) (rec *Record, env *dispatch.Envelope, ok bool, err error) {
	window := min(wait, quickWindow)
	if wait <= 0 {
		window = s.opts.SubmitWindow
	}
	if s.opts.InlineSlots < 0 || (wait <= 0 && !s.quick(r.Tool, window/4)) || !s.st.Writable() {
		// Nobody waits for a call of a tool that is not quick here: the
		// queue. Nor while the store refuses writes: a call run here
		// first could not be kept after, and new calls are to be
		// refused then (503).
		return nil, nil, false, nil
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return nil, nil, false, nil
	}
	if r.Trace == nil {
		r.Trace = tracing.FromContext(ctx)
	}
	r, err = apply(r, claimed(s.name, time.Now().UTC())) // runs here, before it is kept
	if err != nil {
		<-s.slots
		return nil, nil, false, nil // not run here: the queue takes it
	}
	ir := &inlineRun{ended: make(chan struct{}), decided: make(chan struct{})}
	rctx, rn, done := s.begin(r, nil)
	// On a dispatcher worker, not a goroutine of its own: decoding and
	// validating the arguments grow a fresh goroutine's stack two or three
	// times, a copy each (measured: a tenth of an inline call's CPU).
	s.disp.Go(func() { s.runInline(rctx, rn, done, r, ir) })
	select {
	case <-ir.ended:
		rec, env, err = s.endedQuickly(ctx, r, ir, !rn.emitted.Load())
		return rec, env, true, err
	case <-time.After(window):
	}
	if err := s.keep(ctx, rn, r, ir); err != nil {
		s.log.Warn("executions: an async call could not be kept; its caller waits for its answer", zap.String("execution_id", r.ID), zap.Error(err))
		<-ir.ended
		return nil, unkept(ir.env), true, nil
	}
	return r, nil, true, nil
}

// runInline runs the call, then, once the request decided, writes its
// outcome if its record was kept (the request wrote the quick end itself).
// A kept run's lease is renewed from the moment it is kept, while the call
// still runs, until its outcome is written (done ends the heartbeat).
func (s *Service) runInline(ctx context.Context, rn *run, done func(), r *Record, ir *inlineRun) {
	defer func() { <-s.slots }()
	defer done()
	go func() {
		if <-ir.decided; ir.kept {
			s.heartbeat(ctx, rn, r)
		}
	}()
	ir.env = s.runStep(ctx, rn, r)
	close(ir.ended)
	<-ir.decided
	if !ir.kept {
		return
	}
	s.outcome(ctx, rn, r, ir.rev, ir.env)
}

// endedQuickly keeps a call that ended within its window: one record,
// ended (or waiting, if it paused). One that ended without output is
// quiet: its id is not out yet, so nobody follows it, and its record
// alone tells its events (Record.Quiet) — one message a call the store
// need not write (profiles at eight connections with Prefer: wait: the
// embedded server's stream work ~27µs a call before, ~13µs after).
func (s *Service) endedQuickly(ctx context.Context, r *Record, ir *inlineRun, quiet bool) (*Record, *dispatch.Envelope, error) {
	defer close(ir.decided)
	env := ir.env
	if env.Status == dispatch.StatusRejected && passes(env.Error) {
		// Refused for a moment (its tool full here, a capacity, a rate):
		// it did not run, so it goes through the queue as a call run
		// elsewhere would, and runs when it can — an accepted execution is
		// not refused after the fact (issue 38; worker.go's yield).
		pending, err := apply(r, yielded(time.Now().UTC()))
		if err == nil {
			err = s.accept(ctx, pending)
		}
		if err != nil {
			return nil, nil, err
		}
		return pending, nil, nil
	}
	if env.Status == dispatch.StatusWaiting {
		w, err := s.parkRecord(ctx, r, env)
		if err != nil {
			return nil, interruptedAnswer(r, err), nil
		}
		return w, nil, nil
	}
	end := ended(env.Status, env, time.Now().UTC())
	end.quiet = quiet
	// Its audit record at the same time as its one write: the caller is
	// answered once both are in (audited.go); or, while this replica's
	// audit lease would recover it, later (recovery.go).
	audited := s.auditedEnd(ctx, r, &end, s.settleBudget(r))
	final, err := apply(r, end) // it ran here and ended: the record it is accepted with
	var w wrote
	if err == nil {
		w, err = s.commit(ctx, nil, 0, accepted(final), how{budget: s.settleBudget(r)})
	}
	audited()
	if err != nil {
		s.log.Warn("executions: an async call that ended could not be kept; its caller gets its answer now", zap.String("execution_id", r.ID), zap.Error(err))
		return nil, unkept(env), nil
	}
	s.accepted(r)
	s.endedUnawaited(w.rec) // its id is in the answer only: nobody waits for it yet
	return w.rec, nil, nil
}

// keep makes a call running here durable: its lease and its record,
// running here, written at once (one round trip, not two); then the run
// writes its outcome. On an error nothing is left of it in the store, and
// the run writes nothing.
func (s *Service) keep(ctx context.Context, rn *run, r *Record, ir *inlineRun) error {
	defer close(ir.decided)
	var leaseErr error
	var wg sync.WaitGroup
	wg.Go(func() { leaseErr = s.armLease(ctx, rn, r, acceptBudget) })
	w, err := s.commit(ctx, nil, 0, accepted(r), how{budget: acceptBudget})
	ir.rev = w.rev // 0 when its outcome is unknown: taken back whatever it holds
	wg.Wait()
	if err != nil || leaseErr != nil {
		s.takeBack(ctx, r.key(), ir.rev)
		s.disarmLease(rn, r)
		return StoreError(cmp.Or(err, leaseErr))
	}
	ir.kept = true
	s.accepted(r)
	return nil
}

// unkept is the answer of a call that ran here but that the store did not
// keep: its envelope, as a synchronous call's, naming no execution (there
// is none to read).
func unkept(env *dispatch.Envelope) *dispatch.Envelope {
	e := *env
	e.ExecutionID = ""
	return &e
}

// accepted counts and announces an execution accepted here.
func (s *Service) accepted(r *Record) {
	s.m.executions.WithLabelValues(string(dispatch.StatusPending)).Inc()
	s.rec.Accepted(events.Event{ExecutionID: r.ID, RequestID: r.RequestID, Tool: r.Tool, Caller: r.Caller, Principal: r.Principal,
		Status: string(dispatch.StatusPending)})
}

// interruptedAnswer answers a call that paused but whose wait the store
// could not keep: it ran, and must not be told nothing was accepted.
func interruptedAnswer(r *Record, err error) *dispatch.Envelope {
	te := tools.Errorf(tools.SystemError, "the call paused to wait, and the state store could not keep the wait (%v); it may have done part of its work", err).
		WithCode(tools.CodeInterrupted).WithSuggestion("retry in a few seconds; GET /readyz says when the store is back")
	return dispatch.Failure(r.RequestID, r.Tool, dispatch.StatusInterrupted, te)
}

// The lease of a run taken on here is a timer due three heartbeats on,
// set again every heartbeat; it fires only if this replica stops.

func (s *Service) leaseData(r *Record) []byte {
	data, _ := json.Marshal(work{Key: r.key(), Step: r.Step})
	return data
}

func (s *Service) armLease(ctx context.Context, rn *run, r *Record, budget time.Duration) error {
	return s.retryStore(ctx, budget, func(ctx context.Context) error {
		seq, err := s.st.Schedule(ctx, r.ID, time.Now().Add(3*s.opts.Heartbeat), s.leaseData(r))
		if err == nil {
			rn.mu.Lock()
			rn.lease = seq
			rn.mu.Unlock()
		}
		return err
	})
}

// renew renews a run's lease: its delivery's, or its timer.
func (s *Service) renew(ctx context.Context, rn *run, r *Record) {
	if msg := rn.delivery(); msg != nil {
		_ = msg.InProgress()
		return
	}
	if err := s.armLease(ctx, rn, r, s.opts.Heartbeat); err != nil {
		s.log.Warn("executions: an execution's lease could not be renewed", zap.String("execution_id", r.ID), zap.Error(err))
	}
}

// handOver gives a run stopped by a drain to another replica at once: its
// delivery goes back to the queue, or its lease falls due now.
func (s *Service) handOver(rn *run, r *Record) {
	if msg := rn.delivery(); msg != nil {
		_ = msg.Nak()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), acceptBudget)
	defer cancel()
	if _, err := s.st.Schedule(ctx, r.ID, time.Now(), s.leaseData(r)); err != nil {
		s.log.Warn("executions: a drained execution could not be handed over; its lease ends it", zap.String("execution_id", r.ID), zap.Error(err))
	}
}

// disarmLease deletes a run's lease timer once its outcome is written. (A
// wait's timer replaces it: then it is gone already.)
func (s *Service) disarmLease(rn *run, r *Record) {
	rn.mu.Lock()
	seq := rn.lease
	rn.mu.Unlock()
	if seq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), acceptBudget)
	defer cancel()
	if err := s.st.Unschedule(ctx, seq); err != nil {
		s.log.Warn("executions: an ended execution's lease could not be deleted; it is dropped when it fires", zap.String("execution_id", r.ID), zap.Error(err))
	}
}

// quick reports whether tool's calls run in less than limit here; a tool
// none of whose calls ended here yet is not.
func (s *Service) quick(tool string, limit time.Duration) bool {
	mean := s.disp.ServiceTime(tool)
	return mean > 0 && mean < limit
}
