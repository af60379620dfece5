package confirm

import (
	"context"
	"sync"
	"time"
)

// maxRemembered bounds the in-memory ledger; past it, a token is refused
// rather than accepted without being remembered.
const maxRemembered = 100_000

// memory is the ledger of a gate without a state store: this process's
// used tokens, kept until they expire. It is enough there because the
// process's key, and with it every token it issued, ends with the process.
type memory struct {
	now  func() time.Time
	mu   sync.Mutex
	used map[string]time.Time // id -> expiry
}

func newMemory() *memory { return &memory{now: time.Now, used: map[string]time.Time{}} }

func (m *memory) Spend(_ context.Context, id string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, seen := m.used[id]; seen {
		return ErrUsed
	}
	m.forget()
	if len(m.used) >= maxRemembered {
		return ErrUsed // cannot remember it: refuse rather than allow a replay
	}
	m.used[id] = expires
	return nil
}

// forget drops expired entries; m.mu must be held.
func (m *memory) forget() {
	if len(m.used) < 1024 {
		return // cheap enough to keep; swept when it grows
	}
	now := m.now()
	for k, exp := range m.used {
		if !now.Before(exp) {
			delete(m.used, k)
		}
	}
}
