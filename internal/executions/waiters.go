package executions

import (
	"context"
	"slices"
	"time"

	"github.com/toold/toold/internal/dispatch"
)

// Wait returns the caller's execution once it is final or waits for the
// caller (an answer, a subtask's result), or as it is when d passes or ctx
// ends. A store that is away for a moment (an election) is waited out
// within d, rather than answered 503 before the wait begins.
func (s *Service) Wait(ctx context.Context, caller, id string, d time.Duration) (*Record, error) {
	return s.waitUntil(ctx, caller, id, d, func(r *Record) bool { return r.Status.Final() || r.Status == dispatch.StatusWaiting })
}

// WaitFinal returns the caller's execution once it is final, or as it is
// when d passes or ctx ends.
func (s *Service) WaitFinal(ctx context.Context, caller, id string, d time.Duration) (*Record, error) {
	return s.waitUntil(ctx, caller, id, d, func(r *Record) bool { return r.Status.Final() })
}

// WaitChange returns the caller's execution once it is no longer as seen
// (another status or step), or as it is when d passes or ctx ends: what a
// follower of every step (an MCP task) waits for.
func (s *Service) WaitChange(ctx context.Context, seen *Record, d time.Duration) (*Record, error) {
	return s.waitUntil(ctx, seen.Caller, seen.ID, d, func(r *Record) bool { return r.Status != seen.Status || r.Step != seen.Step })
}

// waitUntil is told of changes by the done subject, and reads the record
// again every second in case a notice was lost. A store that is away for
// a while (an election, a reconnection) is waited out: a caller reading an
// accepted execution is answered the record — its end, or the record as it
// last read it when d passes — not 503, unless no read came through within
// readBudget (or d, if longer). A read that does not wait (d 0) rides the
// store out the same way: a refusal it answered at the first store
// timeout named the execution "rejected, store_unavailable" to a client
// that read until final, while the execution had ended success (issue 38's
// overlapping faults: a node lost while another caught up).
func (s *Service) waitUntil(ctx context.Context, caller, id string, d time.Duration, enough func(*Record) bool) (*Record, error) {
	if s.st == nil || !ValidID(id) {
		return s.Get(ctx, caller, id)
	}
	if d <= 0 {
		return s.readThrough(ctx, caller, id)
	}
	done := s.watch(id)
	defer s.unwatch(id, done)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	giveUp := time.Now().Add(max(d, s.readBudget))
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	var last *Record
	timeUp := false // d passed with nothing read: the first read answers
	for {
		r, err := s.Get(ctx, caller, id)
		switch {
		case err == nil:
			if last = r; enough(r) || timeUp {
				return r, nil
			}
		case !unavailable(err), last == nil && !time.Now().Before(giveUp):
			return nil, err
		}
		select {
		case r := <-done:
			// An end on this replica comes with its record: no read. (A
			// notice from another replica does not: read it.)
			if r != nil && r.Caller == caller && enough(r) {
				return r, nil
			}
		case <-poll.C:
		case <-deadline.C:
			if last != nil {
				return last, nil
			}
			timeUp = true
		case <-ctx.Done():
			if last == nil {
				return nil, err
			}
			return last, nil
		}
	}
}

// readThrough reads the caller's execution, riding out a store that is
// away within readBudget (each attempt bounded: retryStore).
func (s *Service) readThrough(ctx context.Context, caller, id string) (*Record, error) {
	var r *Record
	err := s.retryStore(ctx, s.readBudget, func(ctx context.Context) (err error) {
		r, err = s.Get(ctx, caller, id)
		return err
	})
	return r, err
}

// watch registers a waiter for id's done notice.
func (s *Service) watch(id string) chan *Record {
	ch := make(chan *Record, 1)
	s.wmu.Lock()
	s.waiters[id] = append(s.waiters[id], ch)
	s.wmu.Unlock()
	return ch
}

func (s *Service) unwatch(id string, ch chan *Record) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ws := slices.DeleteFunc(s.waiters[id], func(c chan *Record) bool { return c == ch })
	if len(ws) == 0 {
		delete(s.waiters, id)
	} else {
		s.waiters[id] = ws
	}
}

// notify wakes this replica's waiters of id (a done notice).
func (s *Service) notify(id string) { s.wake(id, nil) }

// wake wakes this replica's waiters of id, handing them r when it is the
// record as it now is (an end or a wait written here).
func (s *Service) wake(id string, r *Record) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, ch := range s.waiters[id] {
		select {
		case ch <- r:
		default:
			if r == nil {
				continue // a wake-up is pending already
			}
			// One is pending: make it this one, with the record.
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- r:
			default:
			}
		}
	}
}
