package registry

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toold/toold/internal/tools"
)

// Live is the set of tools toold serves while it changes: upstream MCP
// servers come, go and change their lists. Readers Load an immutable
// snapshot, so a listing or a call never sees half a list; a change builds a
// new snapshot and swaps it in atomically.
type Live struct {
	cur  atomic.Pointer[Registry]
	mu   sync.Mutex // serializes changes and their notifications
	opts Options
	subs []func(*Registry)
}

// NewLive serves r, and builds later snapshots with opts.
func NewLive(r *Registry, opts Options) *Live {
	l := &Live{opts: opts}
	l.cur.Store(r)
	return l
}

// Load returns the current snapshot.
func (l *Live) Load() *Registry { return l.cur.Load() }

// Subscribe calls fn with every new snapshot, in order, after it is swapped
// in (the limiter creates bulkheads for new tools, metrics their series,
// the MCP server tells its sessions). fn must not call SetSource.
func (l *Live) Subscribe(fn func(*Registry)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs = append(l.subs, fn)
}

// SetSource replaces every tool of the source (tools.Spec.Source) with ts,
// keeping all others. A tool that cannot be served — invalid name or
// schema, impossible limits, a name another tool already has — is skipped
// and reported in the returned errors, each naming it; the rest are served.
// An empty ts removes the source's tools.
func (l *Live) SetSource(source string, ts []tools.Tool) []error {
	return l.SetSourceHolding(source, ts, nil)
}

// SetSourceHolding is SetSource for a source that holds some of its tools
// back: held names them (by canonical name) with the reason a call of one
// is refused. They are not in the snapshot, so no listing shows them and
// no call resolves them; the reason is what a call of one is told.
func (l *Live) SetSourceHolding(source string, ts []tools.Tool, held map[string]string) []error {
	if source == "" {
		return []error{errors.New("registry: tools replaced at run time need a source")}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.Load()
	next := newRegistry()
	for _, e := range old.entries {
		if e.Spec.Source != source {
			next.add(e)
		}
	}
	for name, h := range old.held {
		if h.source != source {
			next.hold(name, h)
		}
	}
	for name, why := range held {
		next.hold(name, heldTool{source: source, why: why})
	}
	var errs []error
	for _, t := range ts {
		e, err := newEntry(t, l.opts)
		switch {
		case err != nil:
			errs = append(errs, err)
		case e.Spec.Source != source:
			errs = append(errs, fmt.Errorf("tool %q: its source is %q, not %q", e.Spec.Name, e.Spec.Source, source))
		case next.byName[e.Spec.Name] != nil:
			errs = append(errs, fmt.Errorf("tool %q: the name is taken by another tool (source %q)", e.Spec.Name,
				cmp.Or(next.byName[e.Spec.Name].Spec.Source, "toold")))
		case next.nameTaken(e) != nil:
			errs = append(errs, duplicate(e, next.nameTaken(e)))
		default:
			next.add(e)
		}
	}
	next.sort()
	l.cur.Store(next)
	for _, fn := range l.subs {
		fn(next)
	}
	return errs
}

func newRegistry() *Registry {
	return &Registry{byName: map[string]*Entry{}, aliases: map[string]string{}}
}

func (r *Registry) hold(name string, h heldTool) {
	if r.held == nil {
		r.held = map[string]heldTool{}
	}
	r.held[name] = h
}

func (r *Registry) add(e *Entry) {
	r.byName[e.Spec.Name] = e
	if e.fname != e.Spec.Name {
		r.aliases[e.fname] = e.Spec.Name
	}
	r.entries = append(r.entries, e)
}

func (r *Registry) sort() {
	slices.SortFunc(r.entries, func(a, b *Entry) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
}

// Rebuild swaps in toold's own tools (those of no source) from first, a
// registry New built and checked, and the options later snapshots are
// built with: a reload. The tools of every source (hosted MCP servers)
// stay, resolved again with opts (a category's limits may have changed);
// one whose name a new tool of toold's own now takes is dropped and
// reported. Calls that resolved a tool from an earlier snapshot keep it:
// a removed tool's call in flight ends as it began.
func (l *Live) Rebuild(first *Registry, opts Options) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.Load()
	next := newRegistry()
	for _, e := range first.entries {
		next.add(e)
	}
	for name, h := range old.held {
		next.hold(name, h)
	}
	var errs []error
	for _, e := range old.entries {
		if e.Spec.Source == "" {
			continue
		}
		ne, err := newEntry(e.Tool, opts)
		switch {
		case err != nil:
			errs = append(errs, err)
		case next.nameTaken(ne) != nil:
			errs = append(errs, duplicate(ne, next.nameTaken(ne)))
		default:
			next.add(ne)
		}
	}
	next.sort()
	l.opts = opts
	l.cur.Store(next)
	for _, fn := range l.subs {
		fn(next)
	}
	return errs
}
