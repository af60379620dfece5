package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toold/toold/internal/tools"
)

type searchTool struct{ name, desc string }

func (s searchTool) Spec() tools.Spec {
	source, _, _ := strings.Cut(s.name, ".")
	return tools.Spec{Name: s.name, Description: s.desc, Category: tools.MCP, Source: source,
		Parameters: json.RawMessage(`{"type":"object","properties":{"state":{"type":"string","enum":["open","closed"]}}}`)}
}

func (searchTool) Execute(context.Context, *tools.Call) (any, error) { return nil, nil }

// generation is an upstream's list as it re-lists: every tool's name and
// description carry the generation.
func generation(g int) []tools.Tool {
	var out []tools.Tool
	for i := range 20 {
		out = append(out, searchTool{fmt.Sprintf("up.gen%d_tool%d", g, i), fmt.Sprintf("Widget gen%d operation number %d.", g, i)})
	}
	return out
}

// TestSearchSwapsWithTheSnapshot: while an upstream re-lists, again and
// again, every search sees one whole list — the index of the snapshot it
// loaded, never half of one list and half of the next — and its hits are
// that snapshot's entries.
func TestSearchSwapsWithTheSnapshot(t *testing.T) {
	first, err := New(Options{}, searchTool{"other.ping", "Pings."})
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(first, Options{})
	live.SetSource("up", generation(0))
	const rounds = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for g := 1; g <= rounds; g++ {
			if errs := live.SetSource("up", generation(g)); errs != nil {
				t.Error(errs)
				return
			}
		}
	})
	// the upstream's tools: the word vectors find other.ping a little
	// similar too
	upstream := func(e *Entry) bool { return e.Spec.Source == "up" }
	for range 4 {
		wg.Go(func() {
			for range rounds {
				snap := live.Load()
				hits := snap.Search("widget operation", 50, upstream)
				if len(hits) != 20 {
					t.Errorf("%d hits: a search saw part of a list", len(hits))
					return
				}
				gen := strings.Split(hits[0].Entry.Spec.Name, "_")[0]
				for _, h := range hits {
					if e, ok := snap.Lookup(h.Entry.Spec.Name); !ok || e != h.Entry || !strings.HasPrefix(h.Entry.Spec.Name, gen+"_") {
						t.Errorf("a hit %s outside the snapshot's list (%s)", h.Entry.Spec.Name, gen)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if hits := live.Load().Search("widget operation", 1, nil); len(hits) != 1 || !strings.HasPrefix(hits[0].Entry.Spec.Name, fmt.Sprintf("up.gen%d_", rounds)) {
		t.Errorf("after the last re-listing: %v", hits)
	}
}

func TestEntryMatches(t *testing.T) {
	r, err := New(Options{}, searchTool{"github.list_issues", "Lists."}, searchTool{"read", "Reads."})
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := r.Lookup("github.list_issues")
	for _, tc := range []struct {
		patterns []string
		want     bool
	}{
		{[]string{"github.*"}, true},
		{[]string{"github__*"}, true},
		{[]string{"github__list_issues"}, true},
		{[]string{"gitlab.*", "read"}, false},
		{nil, false},
	} {
		if got := gh.Matches(tc.patterns); got != tc.want {
			t.Errorf("%v: %v", tc.patterns, got)
		}
	}
}

func TestNewToolsets(t *testing.T) {
	if _, err := NewToolsets([]Toolset{{Name: "bad name", Tools: []string{"x"}}, {Name: "empty"}, {Name: "malformed", Tools: []string{"[x"}}}); err == nil ||
		!strings.Contains(err.Error(), "bad name") || !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("%v", err)
	}
	sets, err := NewToolsets([]Toolset{{Name: "code", Tools: []string{"github.*"}}, {Name: "chat", Tools: []string{"slack.*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := sets.Patterns([]string{"code", "chat"}); err != nil || len(p) != 2 {
		t.Errorf("%v %v", p, err)
	}
	if _, err := sets.Patterns([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "chat, code") {
		t.Errorf("%v", err)
	}
}

// TestSearchIndexOncePerSnapshot: a snapshot builds its index once, and
// callers with different views share it, each filtered at query time; a
// new snapshot has its own.
func TestSearchIndexOncePerSnapshot(t *testing.T) {
	first, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(first, Options{})
	live.SetSource("up", generation(1))
	snap := live.Load()
	ix := snap.SearchIndex()
	even := func(e *Entry) bool { return strings.HasSuffix(e.Spec.Name, "0") || strings.HasSuffix(e.Spec.Name, "2") }
	var wg sync.WaitGroup
	for _, keep := range []func(*Entry) bool{nil, even, func(*Entry) bool { return false }} {
		wg.Go(func() {
			for _, h := range snap.Search("widget operation", 50, keep) {
				if keep != nil && !keep(h.Entry) {
					t.Errorf("%s is outside the caller's view", h.Entry.Spec.Name)
				}
			}
		})
	}
	wg.Wait()
	if snap.SearchIndex() != ix {
		t.Error("the snapshot's index was built again")
	}
	if n := len(snap.Search("widget operation", 50, even)); n != 4 {
		t.Errorf("the even view found %d tools, want 4", n)
	}
	live.SetSource("up", generation(2))
	if live.Load().SearchIndex() == ix {
		t.Error("a new snapshot kept the old index")
	}
}
