package policy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
)

// The parts random policy sets are made of: every way a list or call
// decision can see a tool (its attributes, its name in a scope or a
// condition, the resource itself), the principal (its groups, client,
// kind) and the context (the way in, the time).
var (
	randEffects = []string{"permit", "forbid"}
	randActions = []string{
		`action == toold::Action::"list"`,
		`action == toold::Action::"call"`,
		`action in [toold::Action::"list", toold::Action::"call"]`,
		`action`,
		`action == toold::Action::"approve"`,
	}
	randPrincipals = []string{
		`principal`, `principal`, `principal is toold::User`, `principal == toold::Key::"ci"`,
		`principal == toold::User::"i|alice"`, `principal is toold::Key`,
	}
	randResources = []string{
		`resource`, `resource`, `resource`, `resource == toold::Tool::"t1"`, `resource in toold::Tool::"t2"`,
		`resource is toold::Tool`, `resource is toold::Tool in toold::Tool::"t3"`,
	}
	randConditions = []string{
		`resource.read_only`,
		`resource.destructive`,
		`!resource.destructive && resource.kind == "direct"`,
		`resource.kind == "mcp"`,
		`resource.kind like "sys*"`,
		`resource has server && resource.server == "jira"`,
		`resource has server`,
		`resource.toolsets.contains("a")`,
		`resource.toolsets.containsAny(["b", "c"])`,
		`resource.toolsets.isEmpty()`,
		`resource.toolsets == ["a", "b"]`,
		`resource == toold::Tool::"t4"`,
		`resource in toold::Tool::"t5"`,
		`[toold::Tool::"t6", toold::Tool::"t0"].contains(resource)`,
		`toold::Tool::"t7".read_only`,
		`resource is toold::Tool`,
		`principal is toold::User && principal.groups.contains("ops")`,
		`principal is toold::User && principal.groups.containsAll(["ops", "dev"])`,
		`principal is toold::User && principal.client_id == "c1"`,
		`principal is toold::Key`,
		`context.via == "mcp"`,
		`context.via == "rest" && resource.read_only`,
		`context.time < datetime("2026-12-06T09:00:00.500Z")`,
		`context.time.toDate() == datetime("2026-12-06") && resource.destructive`,
		`context.arguments has count && context.arguments.count > 3`,
		`resource.destructive || context.arguments has force`,
		`context has arguments`,
	}
	randNames = []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}
	randKinds = []string{"direct", "mcp", "system_command"}
	randSets  = []string{"a", "b", "c"}

	// randIdentities are callers, some with the same entity (alice
	// twice, as her token and as another of hers) and some alike but
	// for one attribute: a listing kept for one must not answer for
	// another.
	randIdentities = []*auth.Identity{
		nil,
		{Kind: auth.KindAnonymous},
		{Kind: auth.KindKey, Name: "ci"},
		{Kind: auth.KindKey, Name: "other"},
		{Kind: auth.KindKey, Name: LocalID}, // the local caller's id, as a key's
		{Kind: auth.KindToken, Issuer: "i", Subject: "alice", Client: "c1", Groups: []string{"ops"}},
		{Kind: auth.KindToken, Issuer: "i", Subject: "alice", Client: "c1", Groups: []string{"ops", "ops"}},
		{Kind: auth.KindToken, Issuer: "i", Subject: "alice", Client: "c1", Groups: []string{"ops", "dev"}},
		{Kind: auth.KindToken, Issuer: "i", Subject: "alice", Client: "c2", Groups: []string{"dev", "ops"}},
		{Kind: auth.KindToken, Issuer: "i", Subject: "alice", Client: "c1"},
		{Kind: auth.KindToken, Issuer: "i", Subject: "bob", Client: "c1", Groups: []string{"ops"}},
	}
	// randTimes are within one second, on both sides of the policies'
	// 09:00:00.500, and a day later.
	randTimes = []time.Time{
		time.Date(2026, 12, 6, 9, 0, 0, 100e6, time.UTC),
		time.Date(2026, 12, 6, 9, 0, 0, 499e6, time.UTC),
		time.Date(2026, 12, 6, 9, 0, 0, 500e6, time.UTC),
		time.Date(2026, 12, 6, 9, 0, 0, 900e6, time.UTC),
		time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC),
	}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// randPolicies is a set of 1 to 6 random policies.
func randPolicies(r *rand.Rand) string {
	var b strings.Builder
	for i, n := 0, 1+r.IntN(6); i < n; i++ {
		fmt.Fprintf(&b, "@id(\"p%d\") %s (%s, %s, %s)", i, pick(r, randEffects), pick(r, randPrincipals), pick(r, randActions), pick(r, randResources))
		for j, m := 0, r.IntN(3); j < m; j++ {
			kw := "when"
			if r.IntN(3) == 0 {
				kw = "unless"
			}
			fmt.Fprintf(&b, " %s { %s }", kw, pick(r, randConditions))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

// randCatalog is a catalog as a snapshot has it: tools no policy names
// (many alike) and some of the names policies use, each with random
// attributes.
func randCatalog(r *rand.Rand) []*Resource {
	var out []*Resource
	add := func(name string) {
		t := Tool{Name: name, Kind: pick(r, randKinds), ReadOnly: r.IntN(2) == 0, Destructive: r.IntN(2) == 0}
		if t.Kind == "mcp" {
			t.Server = pick(r, []string{"jira", "git"})
		}
		for _, s := range randSets {
			if r.IntN(3) == 0 {
				t.Toolsets = append(t.Toolsets, s)
			}
		}
		out = append(out, NewResource(t))
	}
	for i := range 16 {
		add(fmt.Sprintf("u%d", i))
	}
	for _, name := range randNames {
		if r.IntN(4) != 0 {
			add(name)
		}
	}
	return out
}

// TestListingShowsWhatListsDecides: for random policy sets, catalogs,
// principals, ways in and times, a listing (its tools decided once per
// class, kept in the engine from one listing to the next, over catalogs
// that serve the same names with other attributes) shows exactly the
// tools Lists shows, decided one at a time.
func TestListingShowsWhatListsDecides(t *testing.T) {
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 42))
	const sets = 150
	var alike, loaded int // sets whose listings were kept and classed by attributes
	for n := 0; n < sets; n++ {
		text := randPolicies(r)
		e, err := load(t, map[string]string{"p.cedar": text})
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, text)
		}
		loaded++
		if e.byAttributes && !e.readsTime {
			alike++
		}
		for range 3 { // three snapshots: the same names, new attributes
			catalog := randCatalog(r)
			for range 12 {
				id, via, now := pick(r, randIdentities), pick(r, Vias), pick(r, randTimes)
				l := e.Listing(id, via, now)
				p := NewPrincipal(id)
				for _, res := range catalog {
					want := e.Lists(p, res, via, now)
					for range 2 { // decided, then kept
						if got := l.Shows(res); got != want {
							t.Fatalf("seed %d: Shows(%s %s) = %v, Lists = %v, for %+v by %s at %s; policies:\n%s",
								seed, res.Name(), res.attrClass, got, want, id, via, now.Format(time.RFC3339Nano), text)
						}
					}
				}
			}
		}
	}
	if alike < sets/4 {
		t.Fatalf("only %d of %d policy sets let listings be kept by class: the test does not reach the cache", alike, loaded)
	}
}

// TestListingConcurrent: concurrent listings of the same principals share
// Listings and answer as Lists does (run with -race).
func TestListingConcurrent(t *testing.T) {
	e := mustLoad(t, `
@id("ro") permit (principal, action in [toold::Action::"list", toold::Action::"call"], resource) when { resource.read_only };
@id("ops") permit (principal is toold::User, action in [toold::Action::"list", toold::Action::"call"], resource) when { principal.groups.contains("ops") };
@id("no t1") forbid (principal, action == toold::Action::"call", resource == toold::Tool::"t1");
`)
	r := rand.New(rand.NewPCG(1, 2))
	var catalog []*Resource
	for range 10 {
		catalog = append(catalog, randCatalog(r)...) // hundreds of classes: the answers' words grow while read
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				id := randIdentities[(g+i)%len(randIdentities)]
				now := time.Now()
				l, p := e.Listing(id, ViaMCP, now), NewPrincipal(id)
				for _, res := range catalog {
					if got, want := l.Shows(res), e.Lists(p, res, ViaMCP, now); got != want {
						select {
						case errs <- fmt.Sprintf("Shows(%s) = %v, Lists = %v, for %+v", res.Name(), got, want, id):
						default:
						}
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

// TestListingKept: a principal's listing is kept for the next request by
// the same entity and way in, not shared with another, and not kept when
// a policy reads the time.
func TestListingKept(t *testing.T) {
	e := mustLoad(t, `@id("all") permit (principal, action, resource);`)
	now := time.Now()
	a, b := randIdentities[5], randIdentities[6] // alice, her groups repeated: the same entity
	if e.Listing(a, ViaREST, now) != e.Listing(b, ViaREST, now.Add(time.Hour)) {
		t.Error("the same entity and way in: a listing not kept")
	}
	if e.Listing(a, ViaREST, now) == e.Listing(a, ViaMCP, now) || e.Listing(a, ViaREST, now) == e.Listing(randIdentities[7], ViaREST, now) {
		t.Error("a listing shared by another way in or other groups")
	}
	timed := mustLoad(t, `@id("day") permit (principal, action, resource) when { context.time < datetime("2026-12-06T09:00:00.500Z") };`)
	if timed.Listing(a, ViaREST, now) == timed.Listing(a, ViaREST, now) {
		t.Error("a listing kept though a policy reads the time")
	}
}
