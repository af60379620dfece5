package executions

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// An execution's step is audited by the pipeline like any call: its
// record goes to the recorder's buffer, flushed every 50ms off the call's
// path. For an execution that is not enough: its end outlives the replica
// that ran it (a 202's GET, a Prefer: wait answer), and a replica killed
// within a flush of writing that end would leave an accepted call outside
// the audit log (the chaos harness found one). So a step's audit record
// is made durable before the record that says the step ended or paused is
// written — or, where the caller is answered only after both (a quick
// inline call), at the same time. A replica killed between the two leaves
// the step unended: the queue treats it as a lost replica's (interrupted,
// or run again when idempotent), and that end is audited too.

// auditing starts making the audit records buffered so far durable and
// returns the wait for it (once; later calls return at once), bounded by
// budget. A store that does not take
// them in time is logged: the step's record is written all the same (the
// audit records stay buffered and are retried), as the outcome matters
// more than the order.
func (s *Service) auditing(ctx context.Context, id string, budget time.Duration) (wait func()) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	done := make(chan error, 1)
	go func() { done <- s.rec.Durable(ctx) }()
	return sync.OnceFunc(func() {
		defer cancel()
		if err := <-done; err != nil {
			s.log.Warn("executions: a step's audit record is not in the store yet; its record is written all the same",
				zap.String("execution_id", id), zap.Error(err))
		}
	})
}
