package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toold/toold/internal/registry"
)

// Ticket is a call admitted to its tool's bulkhead before its arguments
// were read (see Admit). Execute runs the call in the ticket's slot; a
// ticket Execute did not take is given back with Release.
type Ticket struct {
	entry    *registry.Entry
	free     func() // frees the slot; called once (see release)
	once     sync.Once
	timeout  time.Duration
	deadline time.Time
	queued   time.Duration
	state    atomic.Int32
}

// The states of a ticket: held by the transport, taken by Execute, or
// given back unused.
const (
	ticketHeld int32 = iota
	ticketTaken
	ticketReleased
)

// Admit is the first part of Execute, for a transport that has not read
// the call's body yet: it resolves the tool, checks the caller may use it,
// and takes a slot of the tool's bulkhead (and of the global cap), waiting
// in the tool's queue or refused at once. So a call that cannot run now is
// refused before its body is read, and a body is read only for a call that
// has a slot: the bodies read at once are bounded by the slots, not by the
// connections.
//
// The call's deadline (the tool's timeout, shortened by req.Timeout)
// starts now: time queued and time reading the body count against it, as
// queue time does in Execute. The transport then reads the body, sets
// req.Body and req.Ticket, and calls Execute, which runs the call through
// every other step in the ticket's slot. A ticket that Execute does not
// take (the body could not be read, an idempotent replay answered instead)
// must be Released. A refusal is the envelope, observed like any call.
func (d *Dispatcher) Admit(ctx context.Context, req *Request) (*Ticket, *Envelope) {
	start := time.Now()
	c := newCall(req, start)
	c.st = d.acquire() // the ticket holds them until its slot is freed
	t, status, err := d.admit(ctx, c, start)
	if err == nil {
		return t, nil
	}
	d.failure(c, status, err)
	d.record(c, start)
	d.release(c.st)
	return nil, c.env
}

func (d *Dispatcher) admit(ctx context.Context, c *call, start time.Time) (*Ticket, Status, error) {
	if status, err := d.identify(c); err != nil {
		return nil, status, err
	}
	held, err := d.principalHold(c)
	if err != nil {
		return nil, StatusRejected, err
	}
	timeout := c.timeout()
	deadline := start.Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	release, err := d.opts.Limiter.Admit(ctx, c.entry)
	if err != nil {
		freeHeld(held)
		status, err := d.admitFailure(ctx, err, timeout)
		return nil, status, err
	}
	st := c.st
	free := both(both(release, held), func() { d.release(st) })
	return &Ticket{entry: c.entry, free: free, timeout: timeout, deadline: deadline, queued: time.Since(start)}, "", nil
}

// Deadline is when the admitted call's time is up: a body still arriving
// then is of no use.
func (t *Ticket) Deadline() time.Time { return t.deadline }

// Release gives back the slot of a ticket Execute did not take. It is safe
// to call more than once, on a nil ticket, and after Execute took the
// ticket (it then does nothing: the slot is freed when the tool returns).
func (t *Ticket) Release() {
	if t != nil && t.state.CompareAndSwap(ticketHeld, ticketReleased) {
		t.release()
	}
}

func (t *Ticket) release() { t.once.Do(t.free) }

// take hands the ticket to the call of tool, once; nil when there is no
// ticket, it is another tool's (a fallback), or it was taken or released.
func (t *Ticket) take(tool string) *Ticket {
	if t == nil || t.entry.Spec.Name != tool || !t.state.CompareAndSwap(ticketHeld, ticketTaken) {
		return nil
	}
	return t
}

// runAdmitted is run for a call whose ticket holds its slot already: the
// steps after admission, under the ticket's deadline.
func (d *Dispatcher) runAdmitted(ctx context.Context, c *call, t *Ticket) (Status, error) {
	c.entry = t.entry
	c.env.Timing.QueuedMS = millis(t.queued)
	return d.runInSlot(ctx, c, t.release, t.timeout, t.deadline)
}
