package policy

import (
	"crypto/sha256"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"

	"github.com/toold/toold/internal/auth"
)

// A listing asks of every tool of the catalog whether the principal may
// list it (Lists), and agents list every turn: decided one tool at a time,
// 1,000 tools cost tens of milliseconds per listing. Two things make it
// cheap, without changing a single answer:
//
//   - tools alike are decided once: a listing's decision on a tool depends
//     on the principal, the way in and the time (the same for the whole
//     listing) and on the tool only through its attributes — unless a
//     policy names the tool (in its scope or as an entity in a condition)
//     or compares the resource itself (resource == ..., resource in ...).
//     So the tools no policy names and that have the same attributes are
//     one class, decided once; a tool a policy names is a class of its own
//     with its attributes (and every tool is, when a policy compares the
//     resource itself);
//   - a principal's decisions are kept, per class, in a Listing the engine
//     keeps for the principal's entity and the way in. When a list or call
//     policy reads context.time, nothing is kept from one listing to the
//     next: each is decided at its own time (tools alike still once).
//
// A Listing belongs to its engine: a new engine (a reload) starts with
// none. It asks by the tool's resource, not by the registry snapshot, so
// it carries over snapshots: a class is made of everything a decision can
// see of a tool, so a tool that arrives, or comes back with other
// attributes, is decided as what it is now. Tools held back (a changed
// pinned definition) are not in a snapshot's entries and never asked.

// maxListings bounds the listings an engine keeps (one per principal and
// way in); past it they are dropped and decided again as they come.
const maxListings = 1024

// maxClasses bounds the classes an engine tells apart; a tool past it is
// decided each time it is asked.
const maxClasses = 1 << 16

// Listing is what one principal may list by one way in (at one time, when
// the policies read it): Shows decides a tool once per class of tools
// alike and keeps the answer. Safe for concurrent use: the engine hands
// the same Listing to concurrent requests of the principal.
type Listing struct {
	e   *Engine
	p   *Principal // resolved: read by concurrent decisions
	via string
	now time.Time

	// shown holds each class's answer in two bits (decided, shown),
	// sixteen classes a word, by the class's number. Read and set
	// atomically; a longer slice replaces it under mu. An answer set
	// in a slice just replaced is lost, and decided again when asked:
	// answers never change, so keeping one twice is harmless.
	shown atomic.Pointer[[]atomic.Uint32]
	mu    sync.Mutex
}

// Shows reports whether the listing shows the tool: Lists, decided once
// per class of tools alike.
func (l *Listing) Shows(r *Resource) bool {
	i := l.e.classOf(r)
	word, shift := i>>4, uint(i&15)*2
	s := *l.shown.Load()
	if i >= 0 && word < len(s) {
		if b := s[word].Load() >> shift; b&1 != 0 {
			return b&2 != 0
		}
	}
	ok := l.e.Lists(l.p, r, l.via, l.now)
	if i < 0 {
		return ok
	}
	if word >= len(s) {
		s = l.grow(word + 1)
	}
	bits := uint32(1)
	if ok {
		bits |= 2
	}
	s[word].Or(bits << shift)
	return ok
}

// grow makes shown at least n words long (doubling, so a first listing
// copies O(classes) in all) and returns it.
func (l *Listing) grow(n int) []atomic.Uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := *l.shown.Load()
	if n <= len(s) {
		return s
	}
	next := make([]atomic.Uint32, max(n, 2*len(s), 4))
	for i := range s {
		next[i].Store(s[i].Load())
	}
	l.shown.Store(&next)
	return next
}

// listings are the Listings an engine keeps, by principal and way in.
type listings struct {
	mu sync.Mutex
	m  map[string]*Listing
}

// Listing is the listing of the caller id (nil: the local caller) by way
// of via at now: the same Listing for the same principal entity (its id,
// groups and client) and way in for as long as the engine serves — or,
// when a list or call policy reads context.time, a Listing of its own,
// decided at now.
func (e *Engine) Listing(id *auth.Identity, via string, now time.Time) *Listing {
	if e.readsTime {
		return e.newListing(id, via, now)
	}
	key := listingKey(id, via)
	c := &e.listings
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.m[key]; ok {
		return l
	}
	if c.m == nil || len(c.m) >= maxListings {
		c.m = map[string]*Listing{}
	}
	l := e.newListing(id, via, now) // now is read by no policy
	c.m[key] = l
	return l
}

func (e *Engine) newListing(id *auth.Identity, via string, now time.Time) *Listing {
	p := NewPrincipal(id)
	p.resolved() // before it is shared
	l := &Listing{e: e, p: p, via: via, now: now}
	l.shown.Store(new([]atomic.Uint32))
	return l
}

// listingKey names the principal entity an identity is (its type, id and
// attributes: what a decision can see of it) and the way in; two
// identities with the same key are decided alike. Every part is length
// prefixed, so no two differ only in where one part ends.
func listingKey(id *auth.Identity, via string) string {
	var b []byte
	part := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	part(via)
	p := NewPrincipal(id)
	part(string(p.entity.UID.Type))
	part(string(p.entity.UID.ID))
	if p.id != nil {
		part(p.id.Client)
		groups := slices.Clone(p.id.Groups)
		slices.Sort(groups)
		for _, g := range slices.Compact(groups) { // a set: order and repeats do not count
			part(g)
		}
	}
	sum := sha256.Sum256(b) // a token may carry many groups: the key stays small
	return string(sum[:])
}

// classes numbers the classes of tools an engine has met.
type classes struct {
	mu sync.Mutex
	m  map[string]int
}

// resourceClass is the number of a resource's class in an engine.
type resourceClass struct {
	e *Engine
	i int
}

// classOf is the number of the class of tools decided alike that r
// belongs to (-1 past maxClasses), kept with r.
func (e *Engine) classOf(r *Resource) int {
	if c := r.class.Load(); c != nil && c.e == e {
		return c.i
	}
	name := r.attrClass
	if !e.byAttributes || e.named[r.entity.UID.ID] {
		name = r.nameClass
	}
	e.classes.mu.Lock()
	i, ok := e.classes.m[name]
	if !ok {
		i = -1
		if len(e.classes.m) < maxClasses {
			i = len(e.classes.m)
			e.classes.m[name] = i
		}
	}
	e.classes.mu.Unlock()
	r.class.Store(&resourceClass{e: e, i: i})
	return i
}

// listingReads notes what a list or call policy's decisions depend on:
// whether it reads context.time, whether it compares the resource itself,
// and the tools it names (in its resource scope, or as entities in its
// conditions).
func (e *Engine) listingReads(p *xast.Policy) {
	switch s := p.Resource.(type) {
	case xast.ScopeTypeEq:
		e.named[s.Entity.ID] = true
	case xast.ScopeTypeIn:
		e.named[s.Entity.ID] = true
	case xast.ScopeTypeIsIn:
		e.named[s.Entity.ID] = true
	}
	for _, c := range p.Conditions {
		e.readsTime = e.readsTime || readsContext(c.Body, "time")
		xast.Inspect(xast.NewNode(c.Body), func(n xast.IsNode) bool {
			switch x := n.(type) {
			case xast.NodeTypeAccess:
				return !isVariable(x.Arg, "resource") // an attribute: what classes are made of
			case xast.NodeTypeHas:
				return !isVariable(x.Arg, "resource")
			case xast.NodeTypeVariable:
				if x.Name == "resource" {
					e.byAttributes = false // the resource itself: its name counts
				}
			case xast.NodeValue:
				switch v := x.Value.(type) {
				case types.EntityUID:
					e.named[v.ID] = true
				case types.Set, types.Record: // not what the parser makes; in case
					e.byAttributes = false
				}
			}
			return true
		})
	}
}

func isVariable(n xast.IsNode, name types.String) bool {
	v, ok := n.(xast.NodeTypeVariable)
	return ok && v.Name == name
}
