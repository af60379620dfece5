package state

import (
	"context"
	"time"
)

// Retry runs op until it succeeds, or fails with an error again does not
// take as passing (the store away, a cluster still forming), or ctx ends;
// it returns op's last error then. Between attempts it waits from 50ms,
// doubling to 1s. Each attempt gets attempt, or what is left of ctx, as
// its deadline: a request whose answer was lost with its connection (sent
// to a node as it died, or as the connection moved) is never answered, and
// without a bound of its own that one attempt would wait out all of ctx
// instead of being tried again on the node that answers now. op must be
// safe to repeat.
func Retry(ctx context.Context, attempt time.Duration, again func(error) bool, op func(context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := op(actx)
		cancel()
		if err == nil || !again(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
