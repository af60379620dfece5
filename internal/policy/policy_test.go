package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/strictjson"
)

// cookbook is docs/policy.md's recipes together (the docs test reads
// them from there too).
const cookbook = `
@id("read-only for everyone")
permit (principal, action in [toold::Action::"list", toold::Action::"call"], resource)
when { resource.read_only };

@id("no secrets")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"read_file")
when { context.arguments has paths && context.arguments.paths.containsAny(["secrets/key", "secrets/token"]) };

@id("deployers deploy")
permit (principal is toold::User, action in [toold::Action::"list", toold::Action::"call"], resource == toold::Tool::"deploy")
when { principal.groups.contains("deployers") };

@id("staging only")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"deploy")
unless { context.arguments has env && context.arguments.env == "staging" };

@id("small batches")
forbid (principal, action == toold::Action::"call", resource)
when { context.arguments has count && context.arguments.count > 100 };

@id("ci calls everything")
permit (principal == toold::Key::"ci", action, resource);

@id("ci never deletes")
forbid (principal == toold::Key::"ci", action == toold::Action::"call", resource == toold::Tool::"delete");

@id("approvers approve")
permit (principal is toold::User, action == toold::Action::"approve", resource)
when { principal.groups.contains("approvers") };
`

func load(t testing.TB, files map[string]string) (*Engine, error) {
	t.Helper()
	dir := t.TempDir()
	var cfg Config
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Files = append(cfg.Files, p)
	}
	return Load(cfg, os.ReadFile)
}

func mustLoad(t testing.TB, text string) *Engine {
	t.Helper()
	e, err := load(t, map[string]string{"policies.cedar": text})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func args(t testing.TB, s string) any {
	t.Helper()
	v, err := strictjson.Decode([]byte(s), 2*MaxArgumentDepth)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var (
	alice = &auth.Identity{Kind: auth.KindToken, Issuer: "https://idp.test/", Subject: "alice", Client: "agent", Groups: []string{"deployers"}}
	bob   = &auth.Identity{Kind: auth.KindToken, Issuer: "https://idp.test/", Subject: "bob"}
	ci    = &auth.Identity{Kind: auth.KindKey, Name: "ci"}
	other = &auth.Identity{Kind: auth.KindKey, Name: "other"}

	readFile = Tool{Name: "read_file", Kind: "direct", ReadOnly: true, Toolsets: []string{"files"}}
	deploy   = Tool{Name: "deploy", Kind: "system_command", Destructive: true}
	del      = Tool{Name: "delete", Kind: "mcp", Server: "jira", Destructive: true}
	search   = Tool{Name: "search", Kind: "mcp", Server: "jira", ReadOnly: true}
)

func TestDecide(t *testing.T) {
	e := mustLoad(t, cookbook)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		who     *auth.Identity
		action  Action
		tool    Tool
		args    string
		allowed bool
		ids     []string
	}{
		{"read-only for everyone", bob, Call, readFile, `{"paths":["README.md"]}`, true, []string{"read-only for everyone"}},
		{"the local caller too", nil, Call, readFile, `{"paths":["README.md"]}`, true, []string{"read-only for everyone"}},
		{"an argument condition refuses", bob, Call, readFile, `{"paths":["README.md","secrets/key"]}`, false, []string{"no secrets"}},
		{"forbid beats permit", ci, Call, readFile, `{"paths":["secrets/token"]}`, false, []string{"no secrets"}},
		{"no permit: nobody named", bob, Call, deploy, `{"env":"staging"}`, false, nil},
		{"a group permits", alice, Call, deploy, `{"env":"staging"}`, true, []string{"deployers deploy"}},
		{"a group, but not prod", alice, Call, deploy, `{"env":"prod"}`, false, []string{"staging only"}},
		{"a missing argument: unless-forbid applies", alice, Call, deploy, `{}`, false, []string{"staging only"}},
		{"a number over the limit", ci, Call, search, `{"count":101}`, false, []string{"small batches"}},
		{"a number at the limit", ci, Call, search, `{"count":100}`, true, []string{"ci calls everything", "read-only for everyone"}},
		{"a number too big for a long fails closed", ci, Call, search, `{"count":1e300}`, false, []string{"small batches"}},
		{"a wrong type fails closed", ci, Call, search, `{"count":"many"}`, false, []string{"small batches"}},
		{"a key forbidden one tool", ci, Call, del, `{}`, false, []string{"ci never deletes"}},
		{"approve: a group", alice, Approve, del, `{}`, false, nil},
		{"approve: the approvers", &auth.Identity{Kind: auth.KindToken, Issuer: "i", Subject: "s", Groups: []string{"approvers"}}, Approve, del, `{}`, true, []string{"approvers approve"}},
		{"list: read-only", other, List, search, ``, true, []string{"read-only for everyone"}},
		{"observe: nobody", alice, Observe, search, ``, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Request{Action: c.action, Principal: NewPrincipal(c.who), Resource: NewResource(c.tool), Via: ViaREST, Time: now}
			if c.args != "" {
				r.Arguments = args(t, c.args)
			}
			d := e.Decide(r)
			if d.Allowed != c.allowed || !cmp.Equal(d.Policies, c.ids) || d.Err != nil {
				t.Errorf("got allowed %v by %q (err %v), want %v by %q", d.Allowed, d.Policies, d.Err, c.allowed, c.ids)
			}
		})
	}
}

// TestLists: a listing shows a tool when list is allowed and some call
// could be: not one every call of which is forbidden.
func TestLists(t *testing.T) {
	e := mustLoad(t, cookbook+`
@id("list all")
permit (principal, action == toold::Action::"list", resource);
@id("never wipe")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"wipe");
@id("wipe for ops")
permit (principal, action == toold::Action::"call", resource == toold::Tool::"wipe");
@id("no destructive over mcp")
forbid (principal, action == toold::Action::"call", resource) when { resource.destructive && context.via == "mcp" || context.arguments has x };
`)
	now := time.Now()
	cases := []struct {
		who  *auth.Identity
		tool Tool
		via  string
		want bool
	}{
		{bob, readFile, ViaREST, true},
		{bob, deploy, ViaREST, false},  // no permit for bob at all
		{alice, deploy, ViaREST, true}, // some arguments pass (env staging)
		{alice, Tool{Name: "wipe", Kind: "direct"}, ViaREST, false},
		{alice, deploy, ViaMCP, false}, // every call over MCP is forbidden
		{ci, del, ViaREST, false},
		{ci, search, ViaREST, true},
	}
	for _, c := range cases {
		if got := e.Lists(NewPrincipal(c.who), NewResource(c.tool), c.via, now); got != c.want {
			t.Errorf("Lists(%v, %s, %s) = %v, want %v", c.who, c.tool.Name, c.via, got, c.want)
		}
	}
}

// TestLoadRefuses: a bad policy is an error at its file, line and column.
func TestLoadRefuses(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"syntax", "permit (principal, action, resource);\npermit (principal action, resource);", []string{"policies.cedar:2:25: the policy does not parse"}},
		{"an unknown attribute", "permit (principal, action, resource);\n\n  @id(\"x\") permit (principal, action, resource) when { resource.kidn == \"mcp\" };",
			[]string{"policies.cedar:3:3", `policy "x"`, "kidn"}},
		{"an unknown action", `permit (principal, action == toold::Action::"run", resource);`, []string{"policies.cedar:1:1", "run"}},
		{"an unknown type", `permit (principal is toold::Person, action, resource);`, []string{"toold::Person"}},
		{"an optional attribute unguarded", `forbid (principal, action, resource) when { resource.server == "jira" };`, []string{"server"}},
		{"a principal attribute of users only", `permit (principal, action, resource) when { principal.groups.contains("x") };`, []string{"groups"}},
		{"a misspelt context", `permit (principal, action, resource) when { context.argumets.x == 1 };`, []string{"argumets"}},
		{"duplicate ids", "@id(\"a\") permit (principal, action, resource);\n@id(\"a\") forbid (principal, action, resource);", []string{"policies.cedar:2:1", `"a" is taken`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, map[string]string{"policies.cedar": c.text})
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
	if _, err := load(t, map[string]string{"ok.cedar": cookbook}); err != nil {
		t.Errorf("the cookbook: %v", err)
	}
}

// TestArgumentsConversion: what a policy sees of each JSON value.
func TestArgumentsConversion(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1,"b":"x","c":true,"d":null}`, `{"a":1,"b":"x","c":true}`},
		{`{"n":[1,1,null,2]}`, `{"n":[1,2]}`},
		{`{"big":12345678901234567890}`, `{"big":"12345678901234567890"}`},
		{`{"e":1e3,"f":2.0,"g":1.5,"h":0.00001,"i":1e999999999}`, `{"e":1000,"f":2,"g":{"__extn":{"fn":"decimal","arg":"1.5"}},"h":"0.00001","i":"1e999999999"}`},
		{`{"κλειδί":"τιμή","🔑":1}`, `{"κλειδί":"τιμή","🔑":1}`},
	}
	for _, c := range cases {
		v, err := Arguments(args(t, c.in))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(v)
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal([]byte(c.want), &w)
		if !cmp.Equal(g, w) {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
	deep := strings.Repeat(`{"a":`, MaxArgumentDepth+2) + "1" + strings.Repeat("}", MaxArgumentDepth+2)
	if _, err := Arguments(args(t, deep)); err != ErrArgumentsTooLarge {
		t.Errorf("too deep: %v", err)
	}
	wide := "[" + strings.Repeat("1,", MaxArgumentValues) + "1]"
	if _, err := Arguments(args(t, wide)); err != ErrArgumentsTooLarge {
		t.Errorf("too wide: %v", err)
	}
}

// BenchmarkDecide prices a call decision with 100 policies beside one
// with none (what a call pays without a policy: nothing is decided).
func BenchmarkDecide(b *testing.B) {
	var sb strings.Builder
	for i := range 98 {
		fmt.Fprintf(&sb, "@id(\"p%d\")\npermit (principal is toold::User, action == toold::Action::\"call\", resource == toold::Tool::\"tool%d\")\nwhen { principal.groups.contains(\"g%d\") && context.arguments has path && context.arguments.path like \"src/*\" };\n", i, i, i)
	}
	sb.WriteString(cookbook[:strings.Index(cookbook, "@id(\"deployers")])
	e := mustLoad(b, sb.String())
	if n := e.Len(); n != 100 {
		b.Fatalf("%d policies", n)
	}
	r := NewResource(readFile)
	a := args(b, `{"paths":["README.md","docs/x.md"],"max_bytes":1000}`)
	now := time.Now()
	b.Run("policies=100", func(b *testing.B) {
		b.ReportAllocs()
		took := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			// A principal per call, as a call builds it.
			d := e.Decide(&Request{Action: Call, Principal: NewPrincipal(alice), Resource: r, Arguments: a, Via: ViaREST, Time: now})
			took = append(took, time.Since(start))
			if !d.Allowed {
				b.Fatal("refused")
			}
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	})
}

// FuzzArguments: any JSON a caller may send converts without a panic,
// within the bounds, and to a value of the shape the JSON had.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"κλειδί":["τιμή",1.5,true,null]}`, `{"n":123456789012345678901234567890}`,
		`{"e":1e308,"f":-1e-308,"g":0.1234,"h":0.12345}`, `[[[[[[]]]]]]`, `{"":{"":{"":""}}}`, `"x"`, `null`, `{"a":[1,1,1,"1"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := strictjson.Decode(data, 2*MaxArgumentDepth)
		if err != nil {
			return
		}
		got, err := Arguments(v)
		if err != nil {
			if err != ErrArgumentsTooLarge {
				t.Fatalf("%q: %v", data, err)
			}
			return
		}
		if _, isObject := v.(map[string]any); isObject {
			if _, ok := got.(types.Record); !ok {
				t.Fatalf("%q: an object became a %T", data, got)
			}
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatalf("%q: the value does not encode: %v", data, err)
		}
	})
}

// TestCookbook: every policy of docs/policy.md loads (they are one file),
// and its test table passes against them.
func TestCookbook(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	var cedarText, table string
	for _, part := range strings.Split(string(doc), "```")[1:] {
		lang, body, _ := strings.Cut(part, "\n")
		switch lang {
		case "cedar":
			cedarText += body
		case "yaml":
			if strings.HasPrefix(body, "tests:") {
				table = body
			}
		}
	}
	if strings.Count(cedarText, "@id(") < 10 || table == "" {
		t.Fatalf("the cookbook is not where it was: %d policies, table %q", strings.Count(cedarText, "@id("), table)
	}
	e := mustLoad(t, cedarText)
	tb, err := ParseTable([]byte(table))
	if err != nil {
		t.Fatal(err)
	}
	results, err := e.Run(tb, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Problem != "" {
			t.Errorf("%s: %s", r.Case.Name, r.Problem)
		}
	}
	// The approver gate's hours.
	night := &Request{Action: Approve, Principal: NewPrincipal(&auth.Identity{Kind: auth.KindToken, Issuer: "i", Subject: "s", Groups: []string{"approvers"}}),
		Resource: NewResource(deploy), Arguments: map[string]any{}, Via: ViaConsole, Time: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)}
	if d := e.Decide(night); d.Allowed || !slices.Equal(d.Policies, []string{"destructive approvals in the day"}) {
		t.Errorf("a destructive approval at night: %+v", d)
	}
	night.Time = time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	if d := e.Decide(night); !d.Allowed {
		t.Errorf("a destructive approval in the day: %+v", d)
	}
}
