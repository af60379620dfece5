package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/diag"
)

func loadPolicy(tb testing.TB, text string) *policy.Engine {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "p.cedar")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	eng, err := policy.Load(policy.Config{Files: []string{file}}, os.ReadFile)
	if err != nil {
		tb.Fatal(err)
	}
	return eng
}

func policyDispatcher(tb testing.TB, eng *policy.Engine, live *registry.Live) *Dispatcher {
	tb.Helper()
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := New(Options{Registry: live, Sanitizer: san, Limiter: limits.New(limits.Options{}), Policy: eng})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

var ops = &auth.Identity{Kind: auth.KindToken, Name: "u@i", Issuer: "i", Subject: "u", Groups: []string{"ops"}}

// TestPolicyStage: the stage decides on the arguments the tool would get
// (after sanitization), before the tool runs; a refusal names the
// policies; Check (an async call's acceptance) decides alike.
func TestPolicyStage(t *testing.T) {
	eng := loadPolicy(t, `
@id("echo") permit (principal, action == toold::Action::"call", resource == toold::Tool::"echo");
@id("no x") forbid (principal, action == toold::Action::"call", resource) when { context.arguments has message && context.arguments.message == "x" };
@id("ops over mcp") permit (principal is toold::User, action == toold::Action::"call", resource == toold::Tool::"noop")
  when { principal.groups.contains("ops") && context.via == "mcp" };
`)
	reg, err := registry.New(registry.Options{}, diag.Echo(), noop{})
	if err != nil {
		t.Fatal(err)
	}
	d := policyDispatcher(t, eng, registry.NewLive(reg, registry.Options{}))
	ctx := context.Background()
	cases := []struct {
		tool, body, via string
		who             *auth.Identity
		denied          string // the message's tail; "" allowed
	}{
		{"echo", `{"message":"hi"}`, policy.ViaREST, nil, ""},
		{"echo", `{"message":"x"}`, policy.ViaREST, nil, `(decided by "no x")`},
		{"noop", `{}`, policy.ViaMCP, ops, ""},
		{"noop", `{}`, policy.ViaREST, ops, `no policy permits this call of "noop"`},
		{"noop", `{}`, policy.ViaMCP, nil, `no policy permits this call of "noop"`},
	}
	for _, c := range cases {
		for _, check := range []bool{false, true} {
			req := &Request{Tool: c.tool, Body: []byte(c.body), RequestID: "r", Principal: c.who, Via: c.via}
			var env *Envelope
			if check {
				env = d.Check(ctx, req)
			} else {
				env = d.Execute(ctx, req)
			}
			switch {
			case c.denied == "" && env != nil && !env.Success:
				t.Errorf("%s %s by %v (check %v): refused: %+v", c.tool, c.body, c.who, check, env.Error)
			case c.denied != "" && (env == nil || env.Error == nil || env.Error.Code != tools.CodePolicyDenied || !strings.HasSuffix(env.Error.Message, c.denied)):
				t.Errorf("%s %s by %v (check %v): got %+v, want a refusal ending %s", c.tool, c.body, c.who, check, env.Error, c.denied)
			}
		}
	}
}

// TestHeldToolRefused: a tool its source holds back is in no snapshot,
// and a call of it is told why (tool_definition_changed), not that it
// does not exist.
func TestHeldToolRefused(t *testing.T) {
	reg, _ := registry.New(registry.Options{})
	live := registry.NewLive(reg, registry.Options{})
	live.SetSourceHolding("up", nil, map[string]string{"up.greet": "its server changed its definition"})
	d := policyDispatcher(t, nil, live)
	env := d.Execute(context.Background(), &Request{Tool: "up.greet", Body: []byte(`{}`), RequestID: "r"})
	if env.Status != StatusRejected || env.Error.Code != tools.CodeToolDefinitionChanged || !strings.Contains(env.Error.Message, "changed its definition") {
		t.Errorf("%+v %+v", env, env.Error)
	}
	live.SetSource("up", nil) // the source lists it no more
	if env := d.Execute(context.Background(), &Request{Tool: "up.greet", Body: []byte(`{}`), RequestID: "r"}); env.Status != StatusNotFound {
		t.Errorf("once gone: %+v", env.Error)
	}
}

// hosted is a tool of the upstream source "up", read-only or not.
type hosted struct {
	name string
	ro   bool
}

func (h hosted) Spec() tools.Spec {
	return tools.Spec{Name: h.name, Description: "A hosted tool.", Category: tools.Direct, Source: "up",
		Parameters: []byte(`{"type":"object"}`), Effects: tools.Effects{ReadOnly: h.ro}}
}
func (hosted) Execute(context.Context, *tools.Call) (any, error) { return nil, nil }

// TestListingAcrossSnapshots: a principal's listing is kept from one
// request to the next, yet a new snapshot — a tool that arrives, one
// served again with other attributes, one named by a policy — is shown as
// the policy decides it now.
func TestListingAcrossSnapshots(t *testing.T) {
	eng := loadPolicy(t, `
@id("read-only") permit (principal, action in [toold::Action::"list", toold::Action::"call"], resource) when { resource.read_only };
@id("b read-only") forbid (principal, action == toold::Action::"call", resource == toold::Tool::"up_b") when { resource.read_only };
@id("b otherwise") permit (principal, action in [toold::Action::"list", toold::Action::"call"], resource == toold::Tool::"up_b") when { !resource.read_only };
`)
	reg, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := registry.NewLive(reg, registry.Options{})
	d := policyDispatcher(t, eng, live)
	shown := func() []string {
		var out []string
		for _, e := range d.Registry().Visible(d.View(ops, nil, policy.ViaMCP)) {
			out = append(out, e.Spec.Name)
		}
		return out
	}
	steps := []struct {
		tools []tools.Tool
		want  []string
	}{
		{[]tools.Tool{hosted{"up_a", true}, hosted{"up_b", true}, hosted{"up_c", false}}, []string{"up_a"}},
		{[]tools.Tool{hosted{"up_a", false}, hosted{"up_b", false}, hosted{"up_c", false}, hosted{"up_d", true}}, []string{"up_b", "up_d"}},
		{[]tools.Tool{hosted{"up_a", true}, hosted{"up_b", true}, hosted{"up_c", true}}, []string{"up_a", "up_c"}},
	}
	for i, st := range steps {
		if errs := live.SetSource("up", st.tools); len(errs) > 0 {
			t.Fatal(errs)
		}
		for range 2 { // decided, then kept
			if got := shown(); !slices.Equal(got, st.want) {
				t.Errorf("snapshot %d: shown %v, want %v", i, got, st.want)
			}
		}
	}
}

// TestSearchSeesTheListing: a tool the call runs (search_tools) sees of
// the catalog only what the caller could list.
func TestSearchSeesTheListing(t *testing.T) {
	eng := loadPolicy(t, `
@id("all") permit (principal, action, resource);
@id("hide noop") forbid (principal, action == toold::Action::"call", resource == toold::Tool::"noop");
`)
	var seen func(string) bool
	spy := tools.Typed(tools.Spec{Name: "spy", Description: "Keeps the catalog view it is given.", Category: tools.Direct},
		func(_ context.Context, c *tools.Call, _ struct{}) (bool, error) { seen = c.Allowed; return true, nil })
	reg, err := registry.New(registry.Options{}, spy, noop{}, diag.Echo())
	if err != nil {
		t.Fatal(err)
	}
	d := policyDispatcher(t, eng, registry.NewLive(reg, registry.Options{}))
	if env := d.Execute(context.Background(), &Request{Tool: "spy", Body: []byte(`{}`), RequestID: "r", Via: policy.ViaMCP}); !env.Success {
		t.Fatal(env.Error)
	}
	var shown []string
	for _, n := range []string{"echo", "noop", "spy"} {
		if seen(n) {
			shown = append(shown, n)
		}
	}
	if !slices.Equal(shown, []string{"echo", "spy"}) {
		t.Errorf("the search tool sees %v", shown)
	}
}

// BenchmarkPolicyCall prices the call decision: the same call of echo
// through the whole pipeline with no policy, and with 100 policies (ten of
// them general, reading the arguments; ninety naming other tools), the two
// alternating in one loop so both see the same machine. It reports each
// one's median (p50-ns, policy-p50-ns) and their difference
// (decision-p50-ns).
//
//	go test ./internal/dispatch -run '^$' -bench BenchmarkPolicyCall -benchtime 20000x -count 5
func BenchmarkPolicyCall(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("@id(\"read-only\") permit (principal, action == toold::Action::\"call\", resource) when { resource.read_only };\n")
	for i := range 9 {
		fmt.Fprintf(&sb, "@id(\"secret %d\") forbid (principal, action == toold::Action::\"call\", resource) when { context.arguments has message && context.arguments.message like \"*secret-%d*\" };\n", i, i)
	}
	for i := range 90 {
		fmt.Fprintf(&sb, "@id(\"tool %d\") permit (principal is toold::User, action == toold::Action::\"call\", resource == toold::Tool::\"tool%d\") when { principal.groups.contains(\"g%d\") };\n", i, i, i)
	}
	eng := loadPolicy(b, sb.String())
	if eng.Len() != 100 {
		b.Fatalf("%d policies", eng.Len())
	}
	body := []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)
	var ds [2]*Dispatcher
	for i, e := range []*policy.Engine{nil, eng} {
		reg, _ := registry.New(registry.Options{}, diag.Echo())
		ds[i] = policyDispatcher(b, e, registry.NewLive(reg, registry.Options{}))
	}
	ctx := context.Background()
	var took [2][]time.Duration
	b.ReportAllocs()
	for b.Loop() {
		for i, d := range ds {
			start := time.Now()
			env := d.Execute(ctx, &Request{Tool: "echo", Body: body, RequestID: "bench", Principal: ops, Via: policy.ViaREST})
			took[i] = append(took[i], time.Since(start))
			if !env.Success {
				b.Fatal(env.Error)
			}
		}
	}
	p50 := func(ts []time.Duration) float64 {
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Nanoseconds())
	}
	none, with := p50(took[0]), p50(took[1])
	b.ReportMetric(none, "p50-ns")
	b.ReportMetric(with, "policy-p50-ns")
	b.ReportMetric(with-none, "decision-p50-ns")
}

// named is a tool of a given name, for catalogs of many.
type named string

func (n named) Spec() tools.Spec {
	return tools.Spec{Name: string(n), Description: "A tool of a large catalog.", Category: tools.Direct,
		Parameters: []byte(`{"type":"object"}`), Effects: tools.Effects{ReadOnly: len(n)%2 == 0}}
}
func (named) Execute(context.Context, *tools.Call) (any, error) { return nil, nil }

// BenchmarkPolicyListing prices a listing's view with the 100 policies of
// BenchmarkPolicyCall over catalogs of 100 and 1,000 tools, three ways in
// one run: each tool decided on its own (per-tool: Engine.Lists, what a
// listing cost before listings were kept), a principal's first listing
// (first: a new principal each time, its tools decided once per class of
// tools alike) and a principal's next ones (again: its listing kept).
//
//	go test ./internal/dispatch -run '^$' -bench BenchmarkPolicyListing -count 5
func BenchmarkPolicyListing(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("@id(\"list\") permit (principal, action == toold::Action::\"list\", resource);\n")
	sb.WriteString("@id(\"read-only\") permit (principal, action == toold::Action::\"call\", resource) when { resource.read_only };\n")
	for i := range 8 {
		fmt.Fprintf(&sb, "@id(\"secret %d\") forbid (principal, action == toold::Action::\"call\", resource) when { context.arguments has message && context.arguments.message like \"*secret-%d*\" };\n", i, i)
	}
	for i := range 90 {
		fmt.Fprintf(&sb, "@id(\"tool %d\") permit (principal is toold::User, action == toold::Action::\"call\", resource == toold::Tool::\"tool%d\") when { principal.groups.contains(\"g%d\") };\n", i, i, i)
	}
	eng := loadPolicy(b, sb.String())
	for _, n := range []int{100, 1000} {
		ts := make([]tools.Tool, n)
		for i := range ts {
			ts[i] = named(fmt.Sprintf("tool%d", i))
		}
		reg, err := registry.New(registry.Options{}, ts...)
		if err != nil {
			b.Fatal(err)
		}
		d := policyDispatcher(b, eng, registry.NewLive(reg, registry.Options{}))
		shown := len(d.Registry().Visible(d.View(ops, nil, policy.ViaREST)))
		b.Run(fmt.Sprintf("tools=%d/per-tool", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, now, k := policy.NewPrincipal(ops), time.Now(), 0
				for _, e := range d.Registry().Entries() {
					if eng.Lists(p, e.PolicyResource(nil), policy.ViaREST, now) {
						k++
					}
				}
				if k != shown {
					b.Fatalf("%d shown, want %d", k, shown)
				}
			}
		})
		b.Run(fmt.Sprintf("tools=%d/first", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				who := *ops
				who.Subject = fmt.Sprintf("u%d", i) // a principal the engine has not seen
				if k := len(d.Registry().Visible(d.View(&who, nil, policy.ViaREST))); k != shown {
					b.Fatalf("%d shown, want %d", k, shown)
				}
			}
		})
		b.Run(fmt.Sprintf("tools=%d/again", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if k := len(d.Registry().Visible(d.View(ops, nil, policy.ViaREST))); k != shown {
					b.Fatalf("%d shown, want %d", k, shown)
				}
			}
		})
	}
}
