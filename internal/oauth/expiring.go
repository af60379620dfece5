package oauth

import (
	"sync"
	"time"
)

// maxRevoked bounds what an in-process record keeps (RevokedInMemory,
// SessionTokensInMemory): past it, the ended entries are dropped, and then
// a new one is refused rather than an older one forgotten.
const maxRevoked = 100_000

// expiring is the in-process record of a toold without a state store: a
// map whose entries each end at a time of their own, at most maxRevoked
// of them. Safe for concurrent use.
type expiring[V any] struct {
	mu  sync.Mutex
	m   map[string]held[V]
	now func() time.Time
}

type held[V any] struct {
	v     V
	until time.Time
}

func newExpiring[V any](now func() time.Time) *expiring[V] {
	if now == nil {
		now = time.Now
	}
	return &expiring[V]{m: map[string]held[V]{}, now: now}
}

// put records v under key until until; false when the record is full of
// entries that have not ended and key is not one of them.
func (e *expiring[V]) put(key string, v V, until time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.m[key]; !ok && len(e.m) >= maxRevoked {
		now := e.now()
		for k, h := range e.m {
			if !now.Before(h.until) {
				delete(e.m, k)
			}
		}
		if len(e.m) >= maxRevoked {
			return false
		}
	}
	e.m[key] = held[V]{v: v, until: until}
	return true
}

// get returns the value under key, unless it has ended.
func (e *expiring[V]) get(key string) (V, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.m[key]
	if !ok || !e.now().Before(h.until) {
		var zero V
		return zero, false
	}
	return h.v, true
}

// forget drops key.
func (e *expiring[V]) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
