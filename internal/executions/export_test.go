package executions

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state"
)

// WorkConsumer is the name of the workers' consumer of the work queue.
const WorkConsumer = consumerName

// TimerConsumer is the name of the timer workers' consumer.
const TimerConsumer = timerConsumer

// WithoutAuditLease makes s, before Start, a replica that never sets its
// audit lease: every end waits for its audit record.
func (s *Service) WithoutAuditLease() { s.lease.off = true }

// AuditLease is the data of s's audit lease as a timer that fired now,
// set at set.
func (s *Service) AuditLease(set time.Time) []byte {
	data, _ := json.Marshal(work{Audit: &auditLease{ID: s.lease.id, Replica: s.name, Until: set, Set: set, Due: set.Add(3 * s.opts.Heartbeat)}})
	return data
}

// RecoverLease handles a fired audit lease's data as a timer worker does,
// and returns how many audit records it recovered.
func (s *Service) RecoverLease(ctx context.Context, data []byte) (int, error) {
	var w work
	if err := json.Unmarshal(data, &w); err != nil {
		return 0, err
	}
	return s.recoverLease(ctx, w.Audit)
}

// ResumeAcross is Resume's read, then between (a test takes the store
// away there), then its write: the step's advance, on its own.
func (s *Service) ResumeAcross(ctx context.Context, caller, id string, answer json.RawMessage, between func()) error {
	r, rev, err := s.get(ctx, caller, id)
	if err != nil {
		return err
	}
	between()
	_, err = s.advance(ctx, r, rev, resumedWith(answer, time.Now().UTC()))
	return err
}

// ReadBudget sets how long s's reads ride out the store.
func (s *Service) ReadBudget(d time.Duration) { s.readBudget = d }

// YieldFor sets how long after its acceptance s gives a refused run back
// to the queue before ending it.
func (s *Service) YieldFor(d time.Duration) { s.yieldFor = d }

// RetryStore is retryStore, each attempt bounded by attempt.
func (s *Service) RetryStore(ctx context.Context, budget, attempt time.Duration, op func(context.Context) error) error {
	return s.retryAttempts(ctx, budget, attempt, op)
}

// QueueAhead publishes a work message for caller's execution id as if its
// record had been written at rev, for step: a message ahead of every read
// of the record, as a stale read sees one.
func (s *Service) QueueAhead(ctx context.Context, caller, id string, rev uint64, step int) error {
	r, _, err := s.get(ctx, caller, id)
	if err != nil {
		return err
	}
	body := r.encode()
	_, err = s.st.Publish(ctx, "work_publish", state.WorkSubject, appendWork(nil, r.key(), rev, body, step), jetstream.WithMsgID(id+".ahead"))
	return err
}

// Landed is landed: a write's conflict taken as its success, or not.
func (s *Service) Landed(ctx context.Context, key string, body []byte, err error) (uint64, error) {
	return s.landed(ctx, key, body, 0, err)
}

// Key is the store key of caller's execution id.
func Key(caller, id string) string { return recordKey(caller, id) }

// ResumeDying is advance on a replica killed after the step's write, and
// after its message too when published: the guard set, nothing after.
func (s *Service) ResumeDying(ctx context.Context, caller, id string, answer json.RawMessage, published bool) error {
	r, rev, err := s.get(ctx, caller, id)
	if err != nil {
		return err
	}
	ev := resumedWith(answer, time.Now().UTC())
	next, err := apply(r, ev)
	if err != nil {
		return err
	}
	if _, err := s.armGuard(ctx, next, s.settleBudget(next)); err != nil {
		return err
	}
	w, err := s.commit(ctx, r, rev, ev, how{})
	if err != nil || !published {
		return err
	}
	return s.queue(ctx, w.rec, w.body, w.rev, acceptBudget)
}
