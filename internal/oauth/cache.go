package oauth

import (
	"sync"
	"time"

	"github.com/toold/toold/internal/auth"
)

// maxCached bounds the verified tokens kept: past it, expired ones are
// dropped, then arbitrary ones (a token not in the cache is verified
// again, which is only slower).
const maxCached = 10_000

// cache keeps verified tokens until they stop being valid, so a token is
// verified once, not on every call. Keys are the tokens themselves: they
// are in memory anyway while requests carry them, and hashing one with
// the map's hash costs less than a cryptographic digest.
type cache struct {
	mu      sync.RWMutex
	entries map[string]cached
}

type cached struct {
	p     *auth.Principal
	until time.Time
	is    *issuer
}

func newCache() *cache { return &cache{entries: map[string]cached{}} }

// get returns a token verified before and valid at now.
func (c *cache) get(raw string, now time.Time) (cached, bool) {
	c.mu.RLock()
	e, ok := c.entries[raw]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return cached{}, false
	}
	return e, true
}

func (c *cache) put(raw string, e cached, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCached {
		for k, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, k)
			}
		}
	}
	for k := range c.entries {
		if len(c.entries) < maxCached {
			break
		}
		delete(c.entries, k)
	}
	c.entries[raw] = e
}

// forget drops every token of an issuer (its keys changed: a key it no
// longer publishes must stop vouching for tokens at once).
func (c *cache) forget(is *issuer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.is == is {
			delete(c.entries, k)
		}
	}
}
