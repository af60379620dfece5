package consult

import (
	"context"
	"sync"
	"time"
)

// availability is what discovery found out about a provider.
type availability struct {
	// Installed: a CLI found on its PATH; an API is always "installed".
	Installed bool
	// Working: the CLI's version flag (an API's models list) answered
	// within the detection timeout.
	Working bool
	Version string
	// Detail says why it is not working.
	Detail string
	// Models an API lists.
	Models    []string
	CheckedAt time.Time
}

func (a availability) usable() bool { return a.Installed && a.Working }

// discovery checks providers and remembers the answers for ttl; a check
// runs once at a time per provider, and callers asking meanwhile wait for
// it rather than start their own.
type discovery struct {
	ttl     time.Duration
	timeout time.Duration
	mu      sync.Mutex
	entries map[string]*cached
}

type cached struct {
	mu    sync.Mutex
	a     availability
	valid bool
}

func newDiscovery(ttl, timeout time.Duration) *discovery {
	return &discovery{ttl: ttl, timeout: timeout, entries: map[string]*cached{}}
}

// check returns p's availability, checking it when the remembered answer
// is older than ttl or refresh is asked. The check does not end with the
// caller's context (its answer is shared), only with its own timeout.
func (d *discovery) check(ctx context.Context, p *provider, refresh bool) availability {
	d.mu.Lock()
	e := d.entries[p.spec.name]
	if e == nil {
		e = &cached{}
		d.entries[p.spec.name] = e
	}
	d.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.valid && !refresh && time.Since(e.a.CheckedAt) < d.ttl {
		return e.a
	}
	start := time.Now()
	e.a = p.impl.probe(context.WithoutCancel(ctx), d.timeout)
	e.a.CheckedAt, e.valid = start, true
	return e.a
}

// checkAll checks providers in parallel, answering in their order.
func (d *discovery) checkAll(ctx context.Context, ps []*provider, refresh bool) []availability {
	out := make([]availability, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { out[i] = d.check(ctx, p, refresh) })
	}
	wg.Wait()
	return out
}
