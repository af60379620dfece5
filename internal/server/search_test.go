package server

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/catalog"
)

// upstreamTool is a tool of an upstream server, as the MCP host registers one.
type upstreamTool struct{ name, desc, params string }

func (h upstreamTool) Spec() tools.Spec {
	source, _, _ := strings.Cut(h.name, ".")
	p := h.params
	if p == "" {
		p = `{"type":"object"}`
	}
	return tools.Spec{Name: h.name, Description: h.desc, Category: tools.MCP, Source: source, Parameters: json.RawMessage(p)}
}

func (h upstreamTool) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]any{"ran": h.name}, nil
}

// searchCatalog has confusable neighbours across three servers.
func searchCatalog() []tools.Tool {
	return []tools.Tool{
		upstreamTool{"github.list_pull_requests", "List pull requests in a GitHub repository.",
			`{"type":"object","properties":{"state":{"type":"string","enum":["open","closed"]}}}`},
		upstreamTool{"github.create_issue", "Create a new issue in a GitHub repository.", ""},
		upstreamTool{"gitlab.list_merge_requests", "List merge requests of a GitLab project.", ""},
		upstreamTool{"jira.create_issue", "Create a new Jira issue (bug, task, story) in a project.", ""},
		upstreamTool{"slack.post_message", "Post a message to a Slack channel.", ""},
	}
}

// newSearchHarness serves the catalog, echo and search_tools (searching
// the harness's own registry), with a toolset "code" of GitHub and GitLab
// that pins GitLab's tools; search.pinned is echo.
func newSearchHarness(t *testing.T, keys []auth.Key) *harness {
	t.Helper()
	var h *harness
	search := catalog.Tool(func(_ context.Context, q catalog.Query) []catalog.Match {
		var out []catalog.Match
		for _, hit := range h.live.Load().Search(q.Text, q.Limit, func(e *registry.Entry) bool {
			return e.Spec.Name != catalog.Name && (q.Allowed == nil || q.Allowed(e.Spec.Name))
		}) {
			out = append(out, catalog.Match{Name: hit.Entry.FunctionName(), Score: hit.Score})
		}
		return out
	})
	sets, err := registry.NewToolsets([]registry.Toolset{{Name: "code", Tools: []string{"github.*", "gitlab__*", catalog.Name},
		Pinned: []string{"gitlab.*"}}})
	if err != nil {
		t.Fatal(err)
	}
	h = newHarness(t, harnessOpts{keys: keys, tools: append(searchCatalog(), testTools()[0], search),
		toolsets: sets, pinned: []string{"echo"}})
	return h
}

// names are the tools a search answered, in order.
func searchNames(t *testing.T, r *response) []string {
	t.Helper()
	var body struct {
		Tools []struct{ Name string }
	}
	if r.status != 200 || json.Unmarshal(r.body, &body) != nil {
		t.Fatalf("search: %d %s", r.status, r.body)
	}
	var out []string
	for _, tl := range body.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func TestSearchRoute(t *testing.T) {
	h := newSearchHarness(t, nil)
	for _, tc := range []struct {
		query, extra string
		first        string
		absent       []string
	}{
		{query: "list pull requests", first: "github.list_pull_requests"},
		{query: "show me the open PRs", first: "github.list_pull_requests"},
		{query: "open a ticket in Jira", first: "jira.create_issue"},
		{query: "tell the team on Slack", first: "slack.post_message"},
		{query: "create an issue", extra: "&toolset=code", first: "github.create_issue", absent: []string{"jira.create_issue"}},
		{query: "search tools", absent: []string{catalog.Name}},
	} {
		names := searchNames(t, h.do("GET", "/tools/search?q="+url.QueryEscape(tc.query)+tc.extra, nil, nil))
		if tc.first != "" && (len(names) == 0 || names[0] != tc.first) {
			t.Errorf("%q%s: %v, want %s first", tc.query, tc.extra, names, tc.first)
		}
		for _, a := range tc.absent {
			if slices.Contains(names, a) {
				t.Errorf("%q%s answered %s: %v", tc.query, tc.extra, a, names)
			}
		}
		if len(names) > 5 {
			t.Errorf("%q: %d matches beyond the default limit", tc.query, len(names))
		}
	}
	if names := searchNames(t, h.do("GET", "/tools/search?q=issue&limit=1", nil, nil)); len(names) != 1 {
		t.Errorf("limit=1: %v", names)
	}
}

func TestSearchRefusals(t *testing.T) {
	h := newSearchHarness(t, nil)
	for _, tc := range []struct{ query, field string }{
		{"", "q"},
		{"q=" + strings.Repeat("x", 1001), "q"},
		{"q=a&limit=0", "limit"},
		{"q=a&limit=51", "limit"},
		{"q=a&format=prompt", "format"},
		{"q=a&toolset=nope", "toolset"},
		{"q=a&call_id=" + url.QueryEscape("x y"), "call_id"},
		{"q=%ff", "q"},
	} {
		r := h.do("GET", "/tools/search?"+tc.query, nil, nil)
		if r.status != 400 || r.env.Error == nil || !strings.Contains(r.env.Error.Message, tc.field) || r.env.Error.Suggestion == "" {
			t.Errorf("?%.40s: %d %s", tc.query, r.status, r.body)
		}
	}
}

// TestSearchFilteredByKey: a key sees only the tools its patterns allow,
// in a search as in a listing, and a key bound to a toolset only that
// toolset's.
func TestSearchFilteredByKey(t *testing.T) {
	within := func(names ...string) func(string) bool {
		return func(tool string) bool { return slices.Contains(names, tool) }
	}
	h := newSearchHarness(t, []auth.Key{
		{Name: "all", SHA256: auth.Hash("key-all"), Tools: []string{"*"}},
		{Name: "github", SHA256: auth.Hash("key-github"), Tools: []string{"github.*", catalog.Name}},
		{Name: "bound", SHA256: auth.Hash("key-bound"), Tools: []string{"*"}, Within: within("gitlab.list_merge_requests", catalog.Name)},
	})
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	q := "/tools/search?q=" + url.QueryEscape("create a new issue") + "&limit=10"
	if names := searchNames(t, h.do("GET", q, nil, bearer("key-all"))); !slices.Contains(names, "jira.create_issue") {
		t.Errorf("the full key misses jira: %v", names)
	}
	for _, n := range searchNames(t, h.do("GET", q, nil, bearer("key-github"))) {
		if !strings.HasPrefix(n, "github.") {
			t.Errorf("the github key found %s", n)
		}
	}
	q = "/tools/search?q=" + url.QueryEscape("list requests") + "&limit=10"
	if names := searchNames(t, h.do("GET", q, nil, bearer("key-bound"))); !slices.Equal(names, []string{"gitlab.list_merge_requests"}) {
		t.Errorf("the bound key found %v", names)
	}
	// search_tools, through the pipeline, sees the same view.
	r := h.exec(catalog.Name, `{"query":"create a new issue","limit":10}`, bearer("key-github"))
	var out catalog.Out
	if raw, _ := json.Marshal(r.env.Data); r.status != 200 || json.Unmarshal(raw, &out) != nil || len(out.Tools) == 0 {
		t.Fatalf("search_tools: %d %s", r.status, r.body)
	}
	for _, m := range out.Tools {
		if !strings.HasPrefix(m.Name, "github__") {
			t.Errorf("search_tools for the github key found %s", m.Name)
		}
	}
}

// TestListingNotModified: a listing carries an ETag; the same listing
// asked with If-None-Match is 304 with no body, until the registry
// changes.
func TestListingNotModified(t *testing.T) {
	h := newSearchHarness(t, nil)
	for _, format := range []string{"openai", "anthropic", "mcp", "native"} {
		path := "/tools?format=" + format
		first := h.do("GET", path, nil, nil)
		etag := first.header.Get("ETag")
		if first.status != 200 || etag == "" {
			t.Fatalf("%s: %d, ETag %q", format, first.status, etag)
		}
		again := h.do("GET", path, nil, map[string]string{"If-None-Match": `"other", ` + etag})
		if again.status != 304 || len(again.body) != 0 || again.header.Get("ETag") != etag {
			t.Errorf("%s unchanged: %d %q", format, again.status, again.body)
		}
		if r := h.do("GET", path+"&toolset=code", nil, map[string]string{"If-None-Match": etag}); r.status != 200 {
			t.Errorf("%s: another view answered %d to the first view's ETag", format, r.status)
		}
	}
	path := "/tools?format=openai"
	etag := h.do("GET", path, nil, nil).header.Get("ETag")
	if errs := h.live.SetSource("linear", []tools.Tool{upstreamTool{"linear.create_issue", "Create a Linear issue.", ""}}); errs != nil {
		t.Fatal(errs)
	}
	r := h.do("GET", path, nil, map[string]string{"If-None-Match": etag})
	if r.status != 200 || r.header.Get("ETag") == etag || !strings.Contains(string(r.body), "linear__create_issue") {
		t.Errorf("after a change: %d, ETag %q (was %q)", r.status, r.header.Get("ETag"), etag)
	}
}

// TestDeferredListing: format=anthropic&defer_loading=true defers every
// tool but search_tools and search.pinned's.
func TestDeferredListing(t *testing.T) {
	h := newSearchHarness(t, nil)
	r := h.do("GET", "/tools?format=anthropic&defer_loading=true", nil, nil)
	var items []map[string]any
	if r.status != 200 || json.Unmarshal(r.body, &items) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, it := range items {
		name, deferred := it["name"].(string), it["defer_loading"] == true
		if loaded := name == catalog.Name || name == "echo"; loaded == deferred {
			t.Errorf("%s: defer_loading %v", name, it["defer_loading"])
		}
	}
	if len(items) != 7 {
		t.Errorf("%d tools listed", len(items))
	}
	for _, q := range []string{"format=openai&defer_loading=true", "format=anthropic&defer_loading=maybe"} {
		if r := h.do("GET", "/tools?"+q, nil, nil); r.status != 400 || !strings.Contains(r.env.Error.Message, "defer_loading") {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
}

// TestPinnedToolset: a deferred listing of a toolset lists in full the
// tools the toolset pins, besides search.pinned's and search_tools; the
// same tools are deferred in a listing of the whole catalog.
func TestPinnedToolset(t *testing.T) {
	h := newSearchHarness(t, nil)
	loaded := func(q string) []string {
		t.Helper()
		r := h.do("GET", "/tools?format=anthropic&defer_loading=true"+q, nil, nil)
		var items []map[string]any
		if r.status != 200 || json.Unmarshal(r.body, &items) != nil {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		var out []string
		for _, it := range items {
			if it["defer_loading"] != true {
				out = append(out, it["name"].(string))
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := loaded("&toolset=code"), []string{"gitlab__list_merge_requests", catalog.Name}; !slices.Equal(got, want) {
		t.Errorf("toolset code: loaded %v, want %v", got, want)
	}
	if got, want := loaded(""), []string{"echo", catalog.Name}; !slices.Equal(got, want) {
		t.Errorf("the whole catalog: loaded %v, want %v", got, want)
	}
}

// TestSearchToolDescribesTheView: in every listing, search_tools'
// description counts the tools of the caller's view by integration, so
// each key's model knows what it can find.
func TestSearchToolDescribesTheView(t *testing.T) {
	h := newSearchHarness(t, []auth.Key{
		{Name: "all", SHA256: auth.Hash("key-all"), Tools: []string{"*"}},
		{Name: "github", SHA256: auth.Hash("key-github"), Tools: []string{"github.*", catalog.Name}},
	})
	describe := func(key, q string) string {
		t.Helper()
		r := h.do("GET", "/tools?format=openai"+q, nil, map[string]string{"Authorization": "Bearer " + key})
		var items []struct {
			Function struct{ Name, Description string }
		}
		if r.status != 200 || json.Unmarshal(r.body, &items) != nil {
			t.Fatalf("%s %s: %d %s", key, q, r.status, r.body)
		}
		for _, it := range items {
			if it.Function.Name == catalog.Name {
				return it.Function.Description
			}
		}
		t.Fatalf("%s %s: no %s in %s", key, q, catalog.Name, r.body)
		return ""
	}
	for _, tc := range []struct {
		key, query string
		want, not  []string
	}{
		{"key-all", "", []string{"the 6 tools you can use", "github (2)", "built-in (1)", "jira (1)", "slack (1)"}, nil},
		{"key-github", "", []string{"the 2 tools you can use", "They cover: github (2)."}, []string{"jira", "slack", "built-in"}},
		{"key-all", "&toolset=code", []string{"the 3 tools you can use", "github (2), gitlab (1)."}, []string{"jira"}},
	} {
		got := describe(tc.key, tc.query)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s%s: %q lacks %q", tc.key, tc.query, got, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%s%s: %q names %q", tc.key, tc.query, got, w)
			}
		}
	}
}

// TestSearchRenderings: each format answers what its consumer takes (the
// SDK type checks are in search_sdk_test.go).
func TestSearchRenderings(t *testing.T) {
	h := newSearchHarness(t, nil)
	get := func(q string) map[string]any {
		r := h.do("GET", "/tools/search?q=pull+requests&limit=2&"+q, nil, nil)
		var v map[string]any
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		return v
	}
	res := get("format=anthropic&call_id=toolu_01")
	content, _ := res["content"].([]any)
	if res["type"] != "tool_result" || res["tool_use_id"] != "toolu_01" || len(content) == 0 {
		t.Fatalf("anthropic: %v", res)
	}
	if ref := content[0].(map[string]any); ref["type"] != "tool_reference" || ref["tool_name"] != "github__list_pull_requests" {
		t.Errorf("anthropic reference: %v", ref)
	}
	out := get("format=openai-responses&call_id=call_7")
	ts, _ := out["tools"].([]any)
	if out["type"] != "tool_search_output" || out["call_id"] != "call_7" || out["execution"] != "client" || len(ts) == 0 ||
		ts[0].(map[string]any)["name"] != "github__list_pull_requests" {
		t.Errorf("openai-responses: %v", out)
	}
	for _, f := range []string{"openai", "mcp"} {
		v := get("format=" + f)
		if tl, sc := v["tools"].([]any), v["scores"].([]any); len(tl) != len(sc) || len(tl) == 0 {
			t.Errorf("%s: %v", f, v)
		}
	}
}
