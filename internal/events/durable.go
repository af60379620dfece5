package events

import (
	"context"
	"errors"
	"time"
)

// Durable returns once every audit record added before it was called is
// in the store, flushing now rather than at the next tick. An execution's
// step calls it before it writes the record that says the step ended: an
// answer that outlives its replica has its audit record outlive it too
// (a replica killed between the two leaves the step unended, which the
// queue treats as a lost replica's). A sync call does not wait for it
// (docs/reliability.md). With the audit log off it returns at once. It
// fails when ctx ends first (the records stay buffered, retried at the
// next flush) or the recorder has stopped.
func (r *Recorder) Durable(ctx context.Context) error {
	if !r.opts.Audit {
		return nil
	}
	ch := make(chan struct{})
	r.mu.Lock()
	// Every record added before now is in the buffer or in the flush
	// under way (numbered r.flushes): the next flush that leaves nothing
	// behind wrote them.
	r.durable = append(r.durable, durableWaiter{after: r.flushes, done: ch})
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default: // a flush is asked for already
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopped:
		select {
		case <-ch: // the last flushes wrote it
			return nil
		default:
			return errRecorderStopped
		}
	}
}

// flushAudit is the flush a Durable call asks for: it appends the audit
// records buffered so far, and only them. Their events stay in the buffer
// for the next timed flush, so the writes a waiting step races with its
// own record are one (the audit block), not one per event subject as
// well, and the events of many quick steps still go out together. It
// runs on the flusher's goroutine, like flush, and takes the records out
// of the buffer in place (items keep their events; auditFrom says how far
// records were taken), so a burst of Durable calls costs a pass over what
// arrived since the last, not over the whole buffer.
func (r *Recorder) flushAudit(ctx context.Context) {
	r.mu.Lock()
	r.flushes++
	gen := r.flushes
	took := time.Now()
	var taken []item // the audit parts taken, to put back if the append fails
	for i := r.auditFrom; i < len(r.pending); i++ {
		it := &r.pending[i]
		if !it.audit {
			continue
		}
		part := *it
		part.activity, part.subject, part.call = false, "", nil
		taken = append(taken, part)
		it.audit = false
	}
	r.auditFrom = len(r.pending)
	r.mu.Unlock()
	// The records are made outside the lock, as flush makes them: hashing
	// large arguments must not hold up the calls that add to the buffer.
	audits := r.audits[:0]
	for i := range taken {
		audits = append(audits, r.record(&taken[i]))
	}
	// In blocks of maxBatch, as the timed flush writes them: a buffer
	// that grew while the store was away is not one message too large
	// to take.
	written := 0
	var err error
	for written < len(audits) && err == nil {
		end := min(written+maxBatch, len(audits))
		actx, cancel := context.WithTimeout(ctx, r.publishTimeout)
		if err = r.appendAudit(actx, audits[written:end]); err == nil {
			written = end
		}
		cancel()
	}
	clear(audits) // drop references to the records' principals
	r.audits = audits[:0]
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// Back in front, in order: the next flush writes them.
		r.pending = append(taken[written:], r.pending...)
		r.auditFrom = 0
	}
	r.audited(took, err != nil)
	r.wakeDurable(gen, err != nil)
	r.m.pending.Set(float64(len(r.pending)))
}

var errRecorderStopped = errors.New("events: the recorder has stopped; the audit record was not written")

// durableWaiter is a Durable call waiting for the first flush numbered
// above after that leaves nothing buffered behind it.
type durableWaiter struct {
	after uint64
	done  chan struct{}
}

// wakeDurable releases the waiters a flush numbered gen satisfied; r.mu
// is held. A flush that left audit records behind (the store refused
// them) satisfies none: they wait for the one that writes them.
func (r *Recorder) wakeDurable(gen uint64, left bool) {
	if left || len(r.durable) == 0 {
		return
	}
	kept := r.durable[:0]
	for _, w := range r.durable {
		if w.after < gen {
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	clear(r.durable[len(kept):])
	r.durable = kept
}

// auditLeft reports whether items hold an audit record still to write.
func auditLeft(items []item) bool {
	for i := range items {
		if items[i].audit {
			return true
		}
	}
	return false
}
