package executions

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
)

// A resumed or approved step is written pending, then its work message
// is published. A replica killed between the two would leave the step
// pending with no message and nobody to remember it (the chaos harness's
// replica kill: a step's record stamped 0.3 ms before the SIGKILL). So
// before the write, advance sets the step's guard: a timer of its own, due
// three heartbeats on (guardDelay), dropped once the message is out.
// Fired, on any replica, the guard publishes the step's message if the record is
// pending at that step — under the message's own id, so a message its
// writer published already (the stream drops a duplicate within two
// minutes; the guard fires well within them) is not published twice. A
// record still waiting at the step before may yet be written — its writer
// rides out the store within the step's budget, and a write it gave up on
// may still be committed when a lost quorum comes back — so the guard
// looks again every heartbeat while it waits (the wait's own expiry ends
// that); anything else, it is done. A writer that knows its step was not
// written drops the guard.

// guardDelay is how long after its write a step's guard fires: three
// heartbeats, and at most a minute, well within the work stream's
// two-minute duplicate window (a guard that fired past it, its step's
// message still queued, would publish a second one).
func guardDelay(heartbeat time.Duration) time.Duration { return min(3*heartbeat, time.Minute) }

// guardID names a step's guard timer: one per execution (a later step's
// replaces it).
func guardID(id string) string { return "step-" + id }

// armGuard sets next's guard before its write, riding out the store
// within budget.
func (s *Service) armGuard(ctx context.Context, next *Record, budget time.Duration) (uint64, error) {
	data, _ := json.Marshal(work{Key: next.key(), Step: next.Step, Guard: true})
	var seq uint64
	err := s.retryStore(ctx, budget, func(ctx context.Context) (err error) {
		seq, err = s.st.Schedule(ctx, guardID(next.ID), time.Now().Add(guardDelay(s.opts.Heartbeat)), data)
		return err
	})
	return seq, err
}

// dropGuard deletes a guard that has nothing left to do (best effort: one
// left behind fires and finds nothing to publish, or publishes a
// duplicate the stream drops).
func (s *Service) dropGuard(ctx context.Context, id string, seq uint64) {
	if err := s.st.Unschedule(context.WithoutCancel(ctx), seq); err != nil {
		s.log.Debug("executions: a step's guard could not be deleted; it fires for nothing", zap.String("execution_id", id), zap.Error(err))
	}
}

// guarded handles a step's guard that fired.
func (s *Service) guarded(ctx context.Context, msg jetstream.Msg, w work) {
	r, rev, err := s.read(ctx, w.Key)
	switch {
	case err != nil:
		_ = msg.NakWithDelay(time.Second) // the store is away: again shortly
		return
	case r != nil && readBehind(r, w.Step-1):
		_ = msg.NakWithDelay(time.Second)
		return
	case r != nil && r.Step == w.Step && r.Status == dispatch.StatusPending:
		if err := s.queue(ctx, r, r.encode(), rev, acceptBudget); err != nil {
			_ = msg.NakWithDelay(time.Second)
			return
		}
	case r != nil && r.Step == w.Step-1 && r.Status == dispatch.StatusWaiting:
		_ = msg.NakWithDelay(s.opts.Heartbeat) // its writer may write it yet
		return
	}
	_ = msg.Ack()
}
