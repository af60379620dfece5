package executions

import (
	"context"
	"encoding/json"
	"time"
)

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
	return s.advance(ctx, r, rev, resumed(r, answer))
}

// RetryStore is retryStore, each attempt bounded by attempt.
func (s *Service) RetryStore(ctx context.Context, budget, attempt time.Duration, op func(context.Context) error) error {
	s.attempt = attempt
	return s.retryStore(ctx, budget, op)
}
