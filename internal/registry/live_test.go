package registry

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func sourced(source, name string) rawTool {
	t := tool(name, `{"type":"object"}`)
	t.spec.Source = source
	return t
}

func names(r *Registry) []string {
	var out []string
	for _, e := range r.Entries() {
		out = append(out, e.Spec.Name)
	}
	return out
}

func TestLiveSetSource(t *testing.T) {
	first, err := New(Options{}, tool("read_file", `{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(first, Options{})
	var seen [][]string
	live.Subscribe(func(r *Registry) { seen = append(seen, names(r)) })

	errs := live.SetSource("up", []tools.Tool{sourced("up", "up.b"), sourced("up", "up.a"),
		sourced("up", "read_file"), sourced("up", "bad name"), sourced("other", "up.c"),
		rawTool{tools.Spec{Name: "up.d", Description: "d", Category: tools.MCP, Source: "up",
			Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`)}}})
	if got, want := names(live.Load()), []string{"read_file", "up.a", "up.b"}; !cmp.Equal(got, want) {
		t.Errorf("after adding: %v, want %v", got, want)
	}
	for _, say := range []string{`"read_file": the name is taken by another tool (source "toold")`, `"bad name": name must match`,
		`"up.c": its source is "other"`, `"up.d": parameters schema is invalid`} {
		if !strings.Contains(joinErrs(errs), say) {
			t.Errorf("errors %q do not say %q", joinErrs(errs), say)
		}
	}
	if got := names(first); !cmp.Equal(got, []string{"read_file"}) {
		t.Errorf("the first snapshot changed: %v", got)
	}

	before := live.Load()
	if errs := live.SetSource("up", []tools.Tool{sourced("up", "up.c")}); errs != nil {
		t.Fatal(errs)
	}
	if got, want := names(live.Load()), []string{"read_file", "up.c"}; !cmp.Equal(got, want) {
		t.Errorf("after replacing: %v, want %v", got, want)
	}
	if got, want := names(before), []string{"read_file", "up.a", "up.b"}; !cmp.Equal(got, want) {
		t.Errorf("a reader's snapshot changed under it: %v, want %v", got, want)
	}
	live.SetSource("up", nil)
	want := [][]string{{"read_file", "up.a", "up.b"}, {"read_file", "up.c"}, {"read_file"}}
	if !cmp.Equal(seen, want) {
		t.Errorf("subscribers saw %v, want %v", seen, want)
	}
	if errs := live.SetSource("", nil); errs == nil {
		t.Error("a change without a source was accepted")
	}
}

// TestLiveReadersNeverSeeHalfAList swaps two sources' lists while readers
// count them: every snapshot a reader loads is whole.
func TestLiveReadersNeverSeeHalfAList(t *testing.T) {
	first, _ := New(Options{})
	live := NewLive(first, Options{})
	list := func(n int) []tools.Tool {
		var ts []tools.Tool
		for i := range n {
			ts = append(ts, sourced("s", "s."+strings.Repeat("x", i+1)))
		}
		return ts
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := live.Load()
				if n := r.Len(); n != 0 && n != 3 && n != 7 {
					t.Errorf("a reader saw %d tools", n)
					return
				}
				for _, e := range r.Entries() {
					if _, ok := r.Lookup(e.Spec.Name); !ok {
						t.Errorf("%s listed but not found", e.Spec.Name)
						return
					}
				}
			}
		}()
	}
	for i := range 200 {
		live.SetSource("s", list([]int{3, 7}[i%2]))
	}
	close(stop)
	wg.Wait()
}

func joinErrs(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}

// TestLiveRebuild: a reload swaps toold's own tools and the options,
// keeps every source's tools (resolved again with the new options), and
// leaves the snapshot a call resolved from untouched.
func TestLiveRebuild(t *testing.T) {
	first, err := New(Options{}, tool("read_file", `{"type":"object"}`), tool("grep", `{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(first, Options{})
	if errs := live.SetSource("up", []tools.Tool{sourced("up", "up.a"), sourced("up", "echo")}); errs != nil {
		t.Fatal(errs)
	}
	var seen int
	live.Subscribe(func(*Registry) { seen++ })
	before := live.Load()
	opts := Options{Defaults: map[tools.Category]tools.Limits{tools.Direct: {MaxInFlight: 3}}}
	next, err := New(opts, tool("read_file", `{"type":"object"}`), tool("echo", `{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	errs := live.Rebuild(next, opts)
	if got, want := names(live.Load()), []string{"echo", "read_file", "up.a"}; !cmp.Equal(got, want) {
		t.Errorf("after the rebuild: %v, want %v", got, want)
	}
	if !strings.Contains(joinErrs(errs), `"echo"`) {
		t.Errorf("the source's tool whose name toold's own took is not reported: %v", errs)
	}
	if e, _ := live.Load().Lookup("up.a"); e.Spec.Limits.MaxInFlight != 3 {
		t.Errorf("the source's tool kept its old limits: %+v", e.Spec.Limits)
	}
	if _, ok := before.Lookup("grep"); !ok || seen != 1 {
		t.Errorf("the earlier snapshot lost grep (%v) or subscribers were told %d times", ok, seen)
	}
	if errs := live.SetSource("up", []tools.Tool{sourced("up", "up.b")}); errs != nil {
		t.Fatal(errs)
	}
	if e, _ := live.Load().Lookup("up.b"); e.Spec.Limits.MaxInFlight != 3 {
		t.Errorf("a source's later tools are not built with the new options: %+v", e.Spec.Limits)
	}
}
