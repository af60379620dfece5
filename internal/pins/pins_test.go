package pins

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/upstream"
)

func def(tool, description string) upstream.Definition {
	b, _ := json.Marshal(map[string]any{"name": tool, "description": description, "inputSchema": map[string]any{"type": "object"}})
	return upstream.Definition{Tool: tool, Canonical: b}
}

// TestAdmit: what a listing is served of, as pins and decisions change.
func TestAdmit(t *testing.T) {
	st := statetest.Open(t, nil, "pins")
	k := New(st.Pins, nil)
	ctx := context.Background()
	admit := func(reviewNew bool, defs ...upstream.Definition) []string {
		t.Helper()
		held, err := k.Admit(ctx, "up", defs, reviewNew)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(held))
	}
	// First contact pins everything, whatever pin_new says.
	if held := admit(true, def("a", "A."), def("b", "B.")); len(held) != 0 {
		t.Fatalf("first contact held %v", held)
	}
	if held := admit(true, def("a", "A."), def("b", "B.")); len(held) != 0 {
		t.Fatalf("the same again held %v", held)
	}
	// A change is held; a new tool too, under review; not under accept.
	if held := admit(true, def("a", "A, and more."), def("b", "B."), def("c", "C.")); !slices.Equal(held, []string{"a", "c"}) {
		t.Fatalf("held %v", held)
	}
	if held := admit(false, def("a", "A, and more."), def("b", "B."), def("d", "D.")); !slices.Equal(held, []string{"a", "c"}[:1]) {
		t.Fatalf("pin_new accept held %v", held)
	}
	changes, err := k.Changes(ctx)
	if err != nil || len(changes) != 2 || changes[0].Name != "up.a" || changes[0].Kind != "changed" || changes[1].Kind != "new" {
		t.Fatalf("changes %+v %v", changes, err)
	}
	if c := changes[0]; !slices.Equal(c.Fields, []string{"description"}) || !strings.Contains(c.Diff, "-  \"description\": \"A.\",\n+  \"description\": \"A, and more.\",\n") {
		t.Errorf("the change: %+v", c)
	}
	// The server goes back: served, and the change dropped.
	if held := admit(false, def("a", "A."), def("b", "B.")); len(held) != 0 {
		t.Fatalf("back to the pin held %v", held)
	}
	// Changed again, refused: still held, and shown refused; a stale
	// decision is refused; accepted: served.
	admit(false, def("a", "A2."))
	if _, err := k.Decide(ctx, "up.a", false, "", "alice"); err != nil {
		t.Fatal(err)
	}
	if held := admit(false, def("a", "A2.")); !slices.Equal(held, []string{"a"}) {
		t.Fatalf("refused, held %v", held)
	}
	if _, err := k.Decide(ctx, "up.a", true, "sha256:00", "alice"); !errors.Is(err, ErrStale) {
		t.Errorf("a stale decision: %v", err)
	}
	if _, err := k.Decide(ctx, "up.a", true, Hash(def("a", "A2.").Canonical), "alice"); err != nil {
		t.Fatal(err)
	}
	if held := admit(false, def("a", "A2.")); len(held) != 0 {
		t.Fatalf("accepted, held %v", held)
	}
	if _, err := k.Decide(ctx, "up.a", true, "", "alice"); !errors.Is(err, ErrNoChange) {
		t.Errorf("nothing to decide: %v", err)
	}
	if _, err := k.Decide(ctx, "nodot", true, "", "alice"); !errors.Is(err, ErrNoChange) {
		t.Errorf("no such tool: %v", err)
	}
}

// TestAdmitRacing: replicas admitting one server's listings at once agree.
func TestAdmitRacing(t *testing.T) {
	st := statetest.Open(t, nil, "pins")
	ctx := context.Background()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := New(st.Pins, nil).Admit(ctx, "up", []upstream.Definition{def("a", "A."), def("b", "B.")}, true)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	held, err := New(st.Pins, nil).Admit(ctx, "up", []upstream.Definition{def("a", "A."), def("b", "B.")}, true)
	if err != nil || len(held) != 0 {
		t.Errorf("after the race: %v %v", held, err)
	}
}

func TestDiff(t *testing.T) {
	cases := []struct{ a, b, want string }{
		{"", "x\n", "+x\n"},
		{"x\n", "", "-x\n"},
		{"a\nb\nc\n", "a\nc\n", " a\n-b\n c\n"},
		{"a\nb\n", "a\nB\n", " a\n-b\n+B\n"},
	}
	for _, c := range cases {
		if got := Diff(c.a, c.b); got != c.want {
			t.Errorf("Diff(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
