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
	used map[string]spent // id -> expiry and spender
}

type spent struct {
	expires time.Time
	by      string
}

func newMemory() *memory { return &memory{now: time.Now, used: map[string]spent{}} }

func (m *memory) Spend(_ context.Context, id string, expires time.Time, spender string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, seen := m.used[id]; seen {
		if spender != "" && s.by == spender {
			return nil
		}
		return ErrUsed
	}
	m.forget()
	if len(m.used) >= maxRemembered {
		return ErrUsed // cannot remember it: refuse rather than allow a replay
	}
	m.used[id] = spent{expires: expires, by: spender}
	return nil
}

// forget drops expired entries; m.mu must be held.
func (m *memory) forget() {
	if len(m.used) < 1024 {
		return // cheap enough to keep; swept when it grows
	}
	now := m.now()
	for k, s := range m.used {
		if !now.Before(s.expires) {
			delete(m.used, k)
		}
	}
}
