package limits

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/tools"
)

// bulkhead is one tool's semaphore with a bounded FIFO queue. A freed slot is
// handed straight to the oldest waiter, so waiters are served in order and a
// newcomer cannot overtake the queue.
type bulkhead struct {
	mu sync.Mutex
	// limits change when a reload resizes the bulkhead (resize); read
	// them under mu, or through lim.
	limits  tools.Limits
	running int
	waiters *list.List // of *waiter, oldest first
	// stuck counts calls that outlived their cancelled context (see
	// Limiter.Stuck); detached, those of them whose slot was given back.
	stuck, detached int
	service         ewma
	inFlight        prometheus.Gauge
	queued          prometheus.Gauge
	rejected        func(reason string)
}

type waiter struct {
	ready   chan struct{}
	granted bool // set under mu when the slot is handed over
}

// full refuses as admit would when no slot and no queue place is free.
func (b *bulkhead) full() error {
	b.mu.Lock()
	full := b.running >= b.limits.MaxInFlight && b.waiters.Len() >= b.limits.Queue()
	pos := b.waiters.Len() + 1
	msg := ""
	if full { // every call asks; only a refusal needs the words
		msg = b.capacityLocked()
	}
	b.mu.Unlock()
	if !full {
		return nil
	}
	b.rejected(ReasonQueueFull)
	return overload(tools.CodeQueueFull, msg, b.retryAfter(pos))
}

// capacityLocked says why the tool is full, naming calls stuck past their
// deadline so that an operator (and the caller) sees a tool wedged by its
// own implementation rather than by load. b.mu must be held.
func (b *bulkhead) capacityLocked() string {
	msg := fmt.Sprintf("the tool is at capacity: %d running and %d queued", b.limits.MaxInFlight, b.limits.Queue())
	if b.stuck > 0 {
		msg += fmt.Sprintf("; %d of its calls ignored their deadline and still run (see /readyz)", b.stuck)
	}
	return msg
}

// stuckCall accounts a call that outlived its cancelled context. Up to
// MaxInFlight such calls per tool are detached: their slots are given back
// (detach true), so a few stuck calls cannot make the tool refuse everyone;
// past that budget they keep their slots, bounding the goroutines a
// misbehaving tool can leave running at twice its limit. done ends the
// accounting when the call finally returns.
func (b *bulkhead) stuckCall() (detach bool, done func()) {
	b.mu.Lock()
	b.stuck++
	if b.detached < b.limits.MaxInFlight {
		b.detached++
		detach = true
	}
	b.mu.Unlock()
	var once sync.Once
	return detach, func() {
		once.Do(func() {
			b.mu.Lock()
			b.stuck--
			if detach {
				b.detached--
			}
			b.mu.Unlock()
		})
	}
}

// admit takes a slot, waiting in the queue for one; or, without wait
// (TryAdmit), only a slot free now: errWouldWait when there is none.
func (b *bulkhead) admit(ctx context.Context, wait bool) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.running < b.limits.MaxInFlight && b.waiters.Len() == 0 {
		b.running++
		b.mu.Unlock()
		b.inFlight.Inc()
		return b.releaser(), nil
	}
	if !wait {
		b.mu.Unlock()
		return nil, errWouldWait
	}
	if b.waiters.Len() >= b.limits.Queue() {
		pos := b.waiters.Len() + 1
		msg := b.capacityLocked()
		b.mu.Unlock()
		b.rejected(ReasonQueueFull)
		return nil, overload(tools.CodeQueueFull, msg, b.retryAfter(pos))
	}
	w := &waiter{ready: make(chan struct{})}
	el := b.waiters.PushBack(w)
	b.mu.Unlock()
	b.queued.Inc()
	return b.wait(ctx, w, el)
}

func (b *bulkhead) wait(ctx context.Context, w *waiter, el *list.Element) (func(), error) {
	lim := b.lim()
	timer := time.NewTimer(lim.QueueWait)
	defer timer.Stop()
	var reason string
	var err error
	select {
	case <-w.ready:
		b.queued.Dec()
		b.inFlight.Inc()
		return b.releaser(), nil
	case <-timer.C:
		reason = ReasonQueueTimeout
	case <-ctx.Done():
		reason, err = ReasonCancelled, ctx.Err()
		if ctx.Err() == context.DeadlineExceeded {
			reason = ReasonDeadline
		}
	}
	b.mu.Lock()
	if w.granted { // the slot arrived as we gave up: pass it on
		b.handoff()
	} else {
		b.waiters.Remove(el)
	}
	depth, stuck := b.waiters.Len(), b.stuck
	b.mu.Unlock()
	b.queued.Dec()
	if reason == ReasonQueueTimeout {
		msg := fmt.Sprintf("no slot became free within the queue-wait bound of %v", lim.QueueWait)
		if stuck > 0 {
			msg += fmt.Sprintf("; %d of the tool's calls ignored their deadline and still run (see /readyz)", stuck)
		}
		err = overload(tools.CodeQueueTimeout, msg, b.retryAfter(depth+1))
	}
	b.rejected(reason)
	return nil, err
}

// releaser returns the function that ends one execution: it records the
// service time and hands the slot to the oldest waiter, if any.
func (b *bulkhead) releaser() func() {
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.service.observe(time.Since(start))
			b.inFlight.Dec()
			b.mu.Lock()
			b.handoff()
			b.mu.Unlock()
		})
	}
}

// giveBack frees a slot admit granted to a call that will not run after
// all (its server is at its cap): no service time is recorded.
func (b *bulkhead) giveBack() {
	b.inFlight.Dec()
	b.mu.Lock()
	b.handoff()
	b.mu.Unlock()
}

// handoff frees one running slot, giving it to the oldest waiter if there
// is one. A bulkhead shrunk below its running calls (resize) keeps the
// slot until it is back within its new size. b.mu must be held.
func (b *bulkhead) handoff() {
	if front := b.waiters.Front(); front != nil && b.running <= b.limits.MaxInFlight {
		w := b.waiters.Remove(front).(*waiter)
		w.granted = true
		close(w.ready)
		return
	}
	b.running--
}

// ewma is an exponentially weighted mean of service times (weight 1/8),
// the basis of Retry-After estimates; zero until the first observation.
type ewma struct{ v atomic.Int64 }

// observe folds a service time into the mean.
func (m *ewma) observe(d time.Duration) {
	for {
		old := m.v.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/8
		}
		if m.v.CompareAndSwap(old, next) {
			return
		}
	}
}

func (m *ewma) mean() time.Duration { return time.Duration(m.v.Load()) }

// retryAfter estimates when a call at queue position pos would get a slot:
// the slots turn over every mean service time, N at a time. Before any call
// has finished the tool's latency target stands in for the mean.
func (b *bulkhead) retryAfter(pos int) time.Duration {
	lim := b.lim()
	mean := b.service.mean()
	if mean == 0 {
		mean = lim.Target
	}
	rounds := (pos + lim.MaxInFlight - 1) / lim.MaxInFlight
	return max(time.Duration(rounds)*mean, time.Millisecond)
}

// lim is the bulkhead's limits now.
func (b *bulkhead) lim() tools.Limits {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limits
}

// resize gives the bulkhead new limits while it serves (a reload). No
// call is dropped: calls running keep their slots (past a smaller size,
// freed slots are not handed on until the bulkhead is back within it),
// waiters keep their places (past a shorter queue, newcomers are refused
// until it drains below), and a larger size hands its new slots to the
// oldest waiters at once. A waiter's queue-wait bound is the one it
// started with.
func (b *bulkhead) resize(l tools.Limits) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limits = l
	for b.running < l.MaxInFlight && b.waiters.Len() > 0 {
		w := b.waiters.Remove(b.waiters.Front()).(*waiter)
		w.granted = true
		b.running++
		close(w.ready)
	}
}
