package executions

import (
	"context"
	"errors"
	"time"

	"github.com/toold/toold/internal/state"
)

// The store goes away for a few seconds at a time even in a healthy
// cluster: a stream's leader dies and the others elect a new one (NATS
// waits 4 to 9 seconds before an election), a node restarts, the
// connection moves to another node. Work that was accepted must ride that
// out, so store operations on its behalf are retried with backoff within
// a budget — the execution's own deadline, or for a new call
// acceptBudget — and every operation retried is safe to repeat (a create
// that finds its own record, a publish deduplicated by its message id, a
// compare-and-set).

// acceptBudget bounds how long a new call (a submit, a parked wait)
// retries the store before it is refused with 503 store_unavailable and
// Retry-After: a lost answer or a connection moving to another node is
// ridden out; a store without a leader (an election, a lost quorum) is
// told to the client soon, who may retry — nothing was accepted.
const acceptBudget = 2 * time.Second

// readBudget bounds how long a read of an accepted execution (GET
// /executions/{id}, and a wait's first read) rides out the store before it
// is answered 503: as long as the execution's own end waits for the store
// at least (settleBudget), which an election (4 to 9 s) and a node catching
// up after a restart stay well within.
const readBudget = 30 * time.Second

// attemptTimeout bounds one attempt within the budget (state.Retry says
// why an attempt needs a bound of its own): five seconds, as the nats
// client's own request timeout and the store's reads without a deadline
// (state.Bucket.askLeader); an attempt cut short is the store being away
// (its deadline), and every op is safe to repeat.
const attemptTimeout = 5 * time.Second

// unavailable reports whether err is the store being away (worth a retry)
// rather than an answer (a conflict, a missing key, a full store).
func unavailable(err error) bool { return errors.Is(err, state.ErrUnavailable) }

// retryStore runs op until it succeeds or fails for another reason than
// the store being unavailable, or until budget passes, ctx ends or the
// connection is closed for good; it returns op's last error then. Backoff
// from 50ms to 1s between attempts. Each attempt gets attemptTimeout, or
// what is left of the budget if that is less, as its deadline.
func (s *Service) retryStore(ctx context.Context, budget time.Duration, op func(context.Context) error) error {
	return s.retryAttempts(ctx, budget, attemptTimeout, op)
}

// retryAttempts is retryStore with each attempt bounded by attempt.
func (s *Service) retryAttempts(ctx context.Context, budget, attempt time.Duration, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	return state.Retry(ctx, attempt, func(err error) bool { return unavailable(err) && !s.st.Conn().IsClosed() }, op)
}
