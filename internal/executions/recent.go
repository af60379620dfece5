package executions

import (
	"sync"
	"time"
)

// recentEnds keeps the final records this replica wrote in the last
// recentFor, so that a read of one that just ended reads no store and
// decodes no JSON: the usual GET ?wait after a submit finds its execution
// ended already (the worker ran it while the client read the 202), and
// that read was about 40µs of a queued call's CPU (profile of submit then
// GET, embedded store). A final record is never written again — every
// writer reads the record and writes at that revision only what follows
// from its status, and nothing follows from a final one — so the record
// kept is the stored one until the store's retention removes it, far
// later than recentFor.
type recentEnds struct {
	mu   sync.Mutex
	byID map[string]recentEnd
	ring [recentMax]string // ids in the order they ended; the oldest goes first
	next int
}

type recentEnd struct {
	r  *Record
	at time.Time
}

const (
	recentMax = 1024
	recentFor = time.Minute
	// recentMaxBytes bounds a record kept by its arguments and envelope:
	// the ring holds no more than about 1024 × 8 KiB (and their decoded
	// forms); a larger record is read from the store.
	recentMaxBytes = 8 << 10
)

// put keeps r, a final record just written.
func (c *recentEnds) put(r *Record) {
	if len(r.Arguments)+len(r.Envelope) > recentMaxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = make(map[string]recentEnd, recentMax)
	}
	if old := c.ring[c.next]; old != "" {
		delete(c.byID, old)
	}
	c.ring[c.next] = r.ID
	c.next = (c.next + 1) % recentMax
	c.byID[r.ID] = recentEnd{r: r, at: time.Now()}
}

// get returns a copy of caller's final record id if it ended here within
// recentFor; its pointers are shared, read-only, as a record handed to
// waiters is.
func (c *recentEnds) get(caller, id string) (*Record, bool) {
	c.mu.Lock()
	e, ok := c.byID[id]
	c.mu.Unlock()
	if !ok || e.r.Caller != caller || time.Since(e.at) > recentFor {
		return nil, false
	}
	r := *e.r
	return &r, true
}
