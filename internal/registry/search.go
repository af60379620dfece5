package registry

import (
	"path"
	"strings"
	"sync"

	"github.com/toold/toold/internal/search"
)

// The search index belongs to the snapshot: it is built from this
// snapshot's tools the first time one is searched, and goes with the
// snapshot, so a search never mixes two lists and a change never waits for
// an index nobody asks for.
type indexOnce struct {
	once sync.Once
	ix   *search.Index
}

// SearchHit is a tool a search found.
type SearchHit struct {
	Entry *Entry
	Score float64
}

// Search returns the limit tools that best match query, best first, of
// those keep accepts (nil keeps all): the caller's view, and a toolset.
func (r *Registry) Search(query string, limit int, keep func(*Entry) bool) []SearchHit {
	ix := r.SearchIndex()
	var k func(int) bool
	if keep != nil {
		k = func(d int) bool { return keep(r.entries[d]) }
	}
	hits := ix.Search(query, limit, k)
	out := make([]SearchHit, len(hits))
	for i, h := range hits {
		out[i] = SearchHit{Entry: r.entries[h.Doc], Score: h.Score}
	}
	return out
}

// SearchIndex returns the snapshot's search index, building it first if
// need be.
func (r *Registry) SearchIndex() *search.Index {
	r.index.once.Do(func() {
		docs := make([]search.Doc, len(r.entries))
		for i, e := range r.entries {
			docs[i] = e.searchDoc()
		}
		r.index.ix = search.Build(docs, search.DefaultOptions())
	})
	return r.index.ix
}

// searchDoc is what the tool is found by: its name, server, title,
// description and instructions, and its parameters.
func (e *Entry) searchDoc() search.Doc {
	e.docOnce.Do(func() {
		s := e.Spec
		desc := s.Description
		if s.Instructions != "" {
			desc += "\n" + s.Instructions
		}
		e.doc = search.Doc{Name: s.Name, Source: s.Source, Title: s.Title, Description: desc,
			Params: search.ParamsFromSchema(s.Parameters)}
	})
	return e.doc
}

// Matches reports whether the tool matches one of the patterns
// (path.Match syntax, as keys' tool patterns), by its canonical name or
// its function name.
func (e *Entry) Matches(patterns []string) bool {
	for _, p := range patterns {
		if match(p, e.Spec.Name) || e.fname != e.Spec.Name && match(p, e.fname) {
			return true
		}
	}
	return false
}

func match(pattern, name string) bool {
	if !strings.ContainsAny(pattern, `*?[\`) {
		return pattern == name
	}
	ok, _ := path.Match(pattern, name)
	return ok
}
