package executions

import (
	"bytes"
	"context"
	"maps"
	"time"

	"go.uber.org/zap"
)

// A step's write whose fate is unknown: advance gave up on the store
// (its budget passed with the store away) after an attempt that may have
// landed — a write proposed to a stream leader that lost its quorum is
// committed when the quorum comes back, however long after. Landed, it
// would leave the next step pending with no message to run it. The
// replica remembers such a step and, once the store answers, reads the
// record: written as the step wrote it, the step is queued now (its
// message's id makes a duplicate harmless); anything else, it forgets.
// Kept in memory: a replica that dies with one forgets it (the bound
// docs/reliability.md names).

// unsettledStep is a step written with its outcome unknown.
type unsettledStep struct {
	prev, next *Record
	body       []byte // next as written
	since      time.Time
}

// rememberUnsettled keeps a step whose write's fate is unknown, for
// sweepUnsettled (bounded, as the orphans are).
func (s *Service) rememberUnsettled(prev, next *Record, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsettled) >= maxOrphans {
		s.log.Error("executions: a step written with its outcome unknown cannot be remembered; if it landed it ends at its retention",
			zap.String("execution_id", next.ID))
		return
	}
	s.unsettled[next.key()] = unsettledStep{prev: prev, next: next, body: body, since: time.Now()}
}

// sweepUnsettled queues the remembered steps that landed, and forgets the
// rest; a store still away leaves them for the next sweep (until the
// retention, after which the record is gone too).
func (s *Service) sweepUnsettled(ctx context.Context) {
	s.mu.Lock()
	steps := maps.Clone(s.unsettled)
	s.mu.Unlock()
	for key, u := range steps {
		if time.Since(u.since) < s.Retention() {
			b, rev, err := s.st.Executions.Get(ctx, key)
			if unavailable(err) {
				return // the store is still away: next time
			}
			if err == nil && bytes.Equal(b, u.body) {
				if err := s.queue(ctx, u.next, u.body, rev, acceptBudget); err != nil {
					return
				}
				s.unindex(ctx, u.prev)
				s.log.Warn("executions: a step whose write's answer was lost had landed; it is queued now", zap.String("execution_id", u.next.ID))
			}
		}
		s.mu.Lock()
		delete(s.unsettled, key)
		s.mu.Unlock()
	}
}
