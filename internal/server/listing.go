package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/catalog"
)

// maxListings bounds the listings kept: views × formats × toolsets of the
// configured keys are few, and past the bound a listing is rendered each
// time (and still answered 304 when unchanged).
const maxListings = 1024

// listings caches the renderings of the current registry snapshot, per
// caller view: an agent backend that lists each turn costs a lookup, and
// with If-None-Match nothing at all crosses the wire. The cache belongs to
// one snapshot and is dropped when the registry changes.
type listings struct {
	mu   sync.Mutex
	snap *registry.Registry
	m    map[string]listing
}

type listing struct {
	body []byte
	etag string
}

// get returns the listing of key in snap, rendering it with render when
// it is not cached.
func (c *listings) get(snap *registry.Registry, key string, render func() ([]byte, error)) (listing, error) {
	c.mu.Lock()
	if c.snap != snap {
		c.snap, c.m = snap, map[string]listing{}
	}
	l, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return l, nil
	}
	body, err := render()
	if err != nil {
		return listing{}, err
	}
	l = listing{body: body, etag: etagOf(body)}
	c.mu.Lock()
	if c.snap == snap && len(c.m) < maxListings {
		c.m[key] = l
	}
	c.mu.Unlock()
	return l, nil
}

// etagOf is a strong validator of a body: 128 bits of its SHA-256.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// notModified reports whether the request's If-None-Match names etag (or
// is *), as RFC 9110 §13.1.2 compares: weakly, a list of entity tags.
func notModified(r *http.Request, etag string) bool {
	for _, v := range r.Header.Values("If-None-Match") {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == etag {
				return true
			}
		}
	}
	return false
}

// listTools is GET /tools: the caller's view of the registry (narrowed by
// ?toolset=) in ?format=, search_tools described by that view; with format=anthropic, ?defer_loading=true marks
// every tool but the search tool and the pinned ones deferred. The
// renderings of formats whose content depends only on the snapshot are
// cached per view; every answer carries an ETag and If-None-Match gets 304.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := registry.ParseFormat(q.Get("format"))
	if err != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError, "%v", err).WithCode(tools.CodeUnknownFormat))
		return
	}
	deferred, terr := parseDeferLoading(q.Get("defer_loading"), f)
	var set *registry.Toolset
	if terr == nil {
		set, terr = s.toolset(r)
	}
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	snap := s.opts.Dispatcher.Registry()
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	entries := snap.Visible(s.view(p, r, set))
	if deferred && !containsTool(entries, catalog.Name) {
		s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError,
			"defer_loading needs the %s tool, which this caller may not use or this toold does not serve", catalog.Name).
			WithCode(tools.CodeSearchUnavailable).WithSuggestion("enable %s and add it to the key's tools", catalog.Name))
		return
	}
	render := func() ([]byte, error) {
		entries := registry.Described(entries, catalog.Name, catalog.Describe)
		if deferred {
			return registry.RenderDeferred(entries, s.pinned(set))
		}
		return registry.Render(f, entries)
	}
	var l listing
	if f == registry.Native { // it shows the upstreams' breakers as they are now: never cached
		var body []byte
		if body, err = render(); err == nil {
			l = listing{body: body, etag: etagOf(body)}
		}
	} else {
		// A principal's view key stands for its view: a key's name (keys
		// are unique by name), a token's issuer and claim narrowing.
		key := p.ViewKey() + "\x00" + string(f) + "\x00" + q.Get("toolset") + "\x00" + strings.ToLower(q.Get("defer_loading"))
		if s.opts.Dispatcher.Policy() != nil { // the policy decided per principal, way in and time: the tools shown are the key
			key = namesKey(entries) + "\x00" + string(f) + "\x00" + strings.ToLower(q.Get("defer_loading"))
		}
		l, err = s.listings.get(snap, key, render)
	}
	if err != nil {
		s.refuse(w, r, "", dispatch.StatusError, tools.Errorf(tools.SystemError, "rendering the listing failed").Wrap(err))
		return
	}
	w.Header().Set("ETag", l.etag)
	w.Header().Set("Cache-Control", "private, no-cache")
	if notModified(r, l.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", f.ContentType())
	_, _ = w.Write(l.body)
}

// parseDeferLoading reads ?defer_loading=: true or false, and true only
// with format=anthropic.
func parseDeferLoading(v string, f registry.Format) (bool, *tools.Error) {
	switch strings.ToLower(v) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		if f != registry.Anthropic {
			return false, badParam("defer_loading", "applies to format=anthropic only", "add format=anthropic, or search with GET /tools/search")
		}
		return true, nil
	}
	return false, badParam("defer_loading", "must be true or false", "use ?format=anthropic&defer_loading=true")
}

// namesKey names a set of tools for the listings' cache: the rendering of
// the same tools is the same whoever asked for it.
func namesKey(entries []*registry.Entry) string {
	h := sha256.New()
	for _, e := range entries {
		h.Write([]byte(e.Spec.Name))
		h.Write([]byte{0})
	}
	return "\x00policy\x00" + string(h.Sum(nil))
}

// pinned reports whether a deferred listing lists a tool in full: the
// search tool, the tools search.pinned names, and those the toolset
// listed (when set) pins.
func (s *Server) pinned(set *registry.Toolset) func(*registry.Entry) bool {
	return func(e *registry.Entry) bool {
		return e.Spec.Name == catalog.Name || e.Matches(s.opts.Pinned) || set != nil && e.Matches(set.Pinned)
	}
}

func containsTool(entries []*registry.Entry, name string) bool {
	for _, e := range entries {
		if e.Spec.Name == name {
			return true
		}
	}
	return false
}
