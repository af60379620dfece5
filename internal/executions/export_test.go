package executions

import (
	"context"
	"encoding/json"
)

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
