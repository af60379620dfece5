package upstream

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// listGen counts the re-lists a server's serve loop starts and ends, so
// a caller can wait for one that began after its change (RelistNow). The
// loop lists one at a time: ended only grows.
type listGen struct {
	mu      sync.Mutex
	started uint64
	ended   uint64
	changed chan struct{} // closed, and replaced, when a list ends
}

func (g *listGen) start() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.started++
	return g.started
}

func (g *listGen) end(id uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended = id
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// next is the id of the first list to start from now on.
func (g *listGen) next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started + 1
}

// wait returns once list id has ended, or ctx has.
func (g *listGen) wait(ctx context.Context, id uint64) error {
	for {
		g.mu.Lock()
		if g.ended >= id {
			g.mu.Unlock()
			return nil
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ErrNotConnected says the server of a tool is not connected: it lists
// its tools when it is back.
var ErrNotConnected = errors.New("the tool's MCP server is not connected; it lists its tools when it is back")

// RelistNow has the server of tool (a hosted tool's name, server.tool)
// list its tools again and returns once that list is served, or ctx
// ends: a decision on a pin (POST /tools/changes/{name}) is answered when
// this replica serves it, not a moment later. A tool of no hosted server
// returns at once.
func (m *Manager) RelistNow(ctx context.Context, tool string) error {
	name, _, _ := strings.Cut(tool, ".") // server names hold no dot
	s := m.named(name)
	if s == nil {
		return nil
	}
	if !s.up() {
		return ErrNotConnected
	}
	// Read before asking: a list with this id or later starts after the
	// decision was made, whichever request it answers (one asked for
	// already starts after now too).
	want := s.gen.next()
	s.askRelist()
	return s.gen.wait(ctx, want)
}

// named is the server of that name, or nil.
func (m *Manager) named(name string) *server {
	for _, s := range m.list() {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// askRelist has the serve loop list the server's tools again; a list
// asked for already and not started answers this ask too.
func (s *server) askRelist() {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}
