package executions

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
)

// A waiting execution's expiry is a message the NATS server schedules
// (state.Store.Schedule): it holds it, and publishes it on the due subject
// when the wait expires, to whichever replica's timer workers take it
// first. No consumer holds a timer while it waits, so open waits cost the
// queue nothing: before, a wait's timer was its work message held back
// (negatively acknowledged with a delay), one of the work consumer's
// MaxAckPending slots (100,000) per open wait, and past that many the
// queue stopped delivering anything.

// timerConsumer is the durable consumer of due timers every replica shares.
const timerConsumer = "toold-timers"

// timerWorkers take due timers on each replica: each is a read and a write
// or two, and timers fall due far more rarely than work arrives.
const timerWorkers = 4

// arm sets the timer of r's wait, recording its sequence in r.
func (s *Service) arm(ctx context.Context, r *Record, budget time.Duration) error {
	data, _ := json.Marshal(work{Key: r.key(), Step: r.Step})
	return s.retryStore(ctx, budget, func(ctx context.Context) error {
		// A retry replaces the first attempt's timer if it landed: one
		// timer per execution.
		seq, err := s.st.Schedule(ctx, r.ID, r.Wait.ExpiresAt, data)
		r.Wait.Schedule = seq
		return err
	})
}

// disarm deletes r's timer, if it has one; a timer left behind fires for
// a step that is over, and is dropped then.
func (s *Service) disarm(ctx context.Context, r *Record) {
	if r.Wait == nil || r.Wait.Schedule == 0 {
		return
	}
	if err := s.st.Unschedule(context.WithoutCancel(ctx), r.Wait.Schedule); err != nil {
		s.log.Warn("executions: a wait's timer could not be deleted; it is dropped when it fires", zap.String("execution_id", r.ID), zap.Error(err))
	}
}

// startTimers creates the timers' consumer and runs its workers until ctx
// ends.
func (s *Service) startTimers(ctx, wctx context.Context) error {
	cons, err := s.st.JetStream().CreateOrUpdateConsumer(ctx, state.TimersStream, jetstream.ConsumerConfig{
		Durable: timerConsumer, FilterSubject: state.TimerDueSubject, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 3 * s.opts.Heartbeat, MaxDeliver: -1, Description: "toold replicas' due timers"})
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go s.take(wctx, cons, timerWorkers, s.due)
	return nil
}

// due handles a timer that fired: a wait that expired ends the execution
// (timeout, wait_expired); the lease of a run taken on where it was
// accepted means its replica stopped setting it: the run is handed to the
// queue, whose worker finds it running on a lost replica (or adopts it,
// here); one it finds pending at its step was put back and not queued
// (yield), and is queued. A step's guard queues a step its writer did not (guard.go). A
// timer of a step that is over, of an ended execution or of one gone is
// dropped.
func (s *Service) due(ctx context.Context, msg jetstream.Msg) {
	w, ok := s.workOf(msg)
	if !ok {
		return
	}
	if w.Audit != nil {
		s.recoverAudit(ctx, msg, w.Audit)
		return
	}
	if w.Guard {
		s.guarded(ctx, msg, w)
		return
	}
	r, rev, err := s.read(ctx, w.Key)
	switch {
	case err != nil:
		_ = msg.NakWithDelay(time.Second) // the store is away: again shortly
		return
	case r != nil && readBehind(r, w.Step):
		_ = msg.NakWithDelay(time.Second)
		return
	case r != nil && sameStep(w.Step, r.Step) && r.Status == dispatch.StatusRunning:
		if !s.adopt(r.ID, msg) {
			s.requeue(ctx, msg, r, rev)
		}
		return
	case r != nil && sameStep(w.Step, r.Step) && r.Status == dispatch.StatusPending:
		// A run taken on where it was accepted, refused before it ran, put
		// back and not queued then (worker.go's yield): its lease queues
		// it, under the step's own message id (one queued meanwhile is not
		// queued twice).
		if err := s.queue(ctx, r, r.encode(), rev, acceptBudget); err != nil {
			_ = msg.NakWithDelay(time.Second)
			return
		}
		_ = msg.Ack()
		return
	case r == nil || !sameStep(w.Step, r.Step) || r.Status != dispatch.StatusWaiting:
		_ = msg.Ack()
		return
	}
	if left := time.Until(r.Wait.ExpiresAt); left > 0 {
		_ = msg.NakWithDelay(left) // the server's clock runs ahead of this one's
		return
	}
	s.conclude(ctx, msg, r, rev, dispatch.StatusTimeout, expiredEnvelope(r))
	s.unindex(ctx, r)
}

// readBehind reports whether r, not ended, reads at a step before step,
// the step a timer was set for (a wait's, a lease's), or after which a
// guard's step comes. Such a timer is set only once its record reached
// that step (a wait's while its step runs; a guard's while the step
// before waits), and steps only grow: the read is stale (a stream leader
// that has not caught up: see handle). Dropping the timer on it would
// lose a wait's expiry or a step's guard for good, so it is read again
// later. An ended record is final at any step: its timers are over.
func readBehind(r *Record, step int) bool {
	return !r.Status.Final() && max(r.Step, 1) < max(step, 1)
}

// requeue gives the queue a run whose lease fell due, and is done with
// the timer; if the queue refuses, the timer comes back.
func (s *Service) requeue(ctx context.Context, msg jetstream.Msg, r *Record, rev uint64) {
	data, _ := json.Marshal(work{Key: r.key(), Revision: rev, Step: r.Step})
	id := r.ID + "." + strconv.Itoa(r.Step) + ".lost." + strconv.Itoa(r.Attempt)
	if _, err := s.st.Publish(ctx, "work_publish", state.WorkSubject, data, jetstream.WithMsgID(id)); err != nil {
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
}

// workOf reads a delivery's work (a work message, a timer); an unreadable
// one is acknowledged, so it never comes back, and dropped.
func (s *Service) workOf(msg jetstream.Msg) (work, bool) {
	var w work
	if err := json.Unmarshal(msg.Data(), &w); err != nil || (w.Key == "" && (w.Audit == nil || w.Audit.Replica == "")) {
		s.log.Error("executions: an unreadable message dropped", zap.String("subject", msg.Subject()), zap.Error(err))
		_ = msg.Ack()
		return w, false
	}
	return w, true
}

// read returns the record under key; nil, without error, when there is
// none (expired, never accepted) or it cannot be read (logged).
func (s *Service) read(ctx context.Context, key string) (*Record, uint64, error) {
	b, rev, err := s.st.Executions.Get(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	r, err := decodeRecord(b)
	if err != nil {
		s.log.Error("executions: unreadable record", zap.String("key", key), zap.Error(err))
		return nil, 0, nil
	}
	return r, rev, nil
}
