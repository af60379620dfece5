package search

import (
	"slices"
	"strings"
	"testing"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"github__list_pull_requests", []string{"github", "list", "pull", "requests"}},
		{"getUserProfile", []string{"get", "user", "profile"}},
		{"HTTPServer", []string{"http", "server"}},
		{"show open PRs", []string{"show", "open", "prs"}},
		{"list VMs and IDs", []string{"list", "vms", "and", "ids"}},
		{"s3.put_object", []string{"s3", "put", "object"}},
		{"ec2 k8s oauth2", []string{"ec2", "k8s", "oauth2"}},
		{"API-post-search", []string{"api", "post", "search"}},
		{"café Überweisung", []string{"café", "überweisung"}},
		{"", nil},
	} {
		if got := words(tc.in, identifier); !slices.Equal(got, tc.want) {
			t.Errorf("words(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestProseKeepsNames(t *testing.T) {
	if got := words("open a GitHub PR in PagerDuty with getUser", prose); !slices.Equal(got,
		[]string{"open", "a", "github", "pr", "in", "pagerduty", "with", "get", "user"}) {
		t.Errorf("prose: %q", got)
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct{ in, server, tool string }{
		{"github__list_issues", "github", "list_issues"},
		{"github.list_issues", "github", "list_issues"},
		{"read_file", "", "read_file"},
		{"__x", "", "__x"},
	} {
		if s, tl := splitName(tc.in); s != tc.server || tl != tc.tool {
			t.Errorf("splitName(%q) = %q, %q", tc.in, s, tl)
		}
	}
}

func TestHints(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"save this into notes.md", []string{"file"}},
		{"download reports/q3.csv", []string{"file"}},
		{"mail x@example.com", []string{"email"}},
		{"open https://example.com now", []string{"url"}},
		{"version 3.5, e.g. this", nil},
	} {
		if got := hints(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("hints(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// catalog is a small catalog with confusable neighbours.
var catalog = []Doc{
	{Name: "github__list_pull_requests", Description: "List pull requests in a GitHub repository.",
		Params: []Param{{Name: "state", Enum: []string{"open", "closed"}}}},
	{Name: "gitlab__list_merge_requests", Description: "List merge requests of a GitLab project."},
	{Name: "github__create_issue", Description: "Create a new issue in a GitHub repository."},
	{Name: "jira.create_issue", Description: "Create a new Jira issue in a project."},
	{Name: "slack__post_message", Description: "Post a message to a Slack channel."},
	{Name: "stripe__create_refund", Description: "Refund a charge or payment intent."},
	{Name: "getUserProfile", Description: "Get a user's profile."},
	{Name: "pagerduty__list_oncalls", Description: "List who is on call for each schedule."},
}

func TestSearchRanks(t *testing.T) {
	ix := Build(catalog, DefaultOptions())
	for _, tc := range []struct{ query, want string }{
		{"list pull requests", "github__list_pull_requests"},
		{"show me the open PRs", "github__list_pull_requests"},
		{"open an MR", "gitlab__list_merge_requests"},
		{"file a ticket in Jira", "jira.create_issue"},
		{"give the customer their money back", "stripe__create_refund"},
		{"user profile", "getUserProfile"},
		{"who is on call", "pagerduty__list_oncalls"},
		{"tell the channel on Slack", "slack__post_message"},
	} {
		hits := ix.Search(tc.query, 3, nil)
		if len(hits) == 0 || catalog[hits[0].Doc].Name != tc.want {
			var got []string
			for _, h := range hits {
				got = append(got, catalog[h.Doc].Name)
			}
			t.Errorf("%q: got %q, want %s first", tc.query, got, tc.want)
		}
	}
}

func TestSearchFilterAndLimit(t *testing.T) {
	ix := Build(catalog, DefaultOptions())
	hits := ix.Search("create issue", 10, func(d int) bool { return !strings.HasPrefix(catalog[d].Name, "github") })
	for _, h := range hits {
		if strings.HasPrefix(catalog[h.Doc].Name, "github") {
			t.Errorf("a filtered document came back: %s", catalog[h.Doc].Name)
		}
	}
	if len(hits) == 0 || catalog[hits[0].Doc].Name != "jira.create_issue" {
		t.Errorf("hits %v", hits)
	}
	if got := ix.Search("create issue", 1, nil); len(got) != 1 {
		t.Errorf("limit 1 gave %d hits", len(got))
	}
	for _, q := range []string{"", "   ", "zzzz qqqq"} {
		if got := ix.Search(q, 5, nil); len(got) != 0 {
			t.Errorf("%q matched %v", q, got)
		}
	}
	// A query of stop words has no concept: the word vectors still answer
	// it, the lexical ranking alone cannot.
	if got := ix.Search("the of and", 5, nil); len(got) == 0 {
		t.Error(`"the of and" found nothing`)
	}
	lexical := DefaultOptions()
	lexical.Dense = false
	if got := Build(catalog, lexical).Search("the of and", 5, nil); len(got) != 0 {
		t.Errorf(`"the of and" matched %v lexically`, got)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("hits out of order: %v", hits)
		}
	}
}

func TestParamsFromSchema(t *testing.T) {
	ps := ParamsFromSchema([]byte(`{"type":"object","properties":{
		"state":{"type":"string","enum":["open","closed"],"description":"Filter"},
		"opts":{"type":"object","properties":{"deep":{"description":"nested"}}},
		"tags":{"type":"array","items":{"enum":["a","b"]}}}}`))
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"opts", "deep", "state", "tags"}) {
		t.Errorf("params %q", names)
	}
	if !slices.Equal(ps[2].Enum, []string{"open", "closed"}) || !slices.Equal(ps[3].Enum, []string{"a", "b"}) {
		t.Errorf("enums %v", ps)
	}
	if ParamsFromSchema([]byte(`not json`)) != nil {
		t.Error("an unreadable schema has parameters")
	}
}

// FuzzSearch: any query (it comes from callers) is answered without a
// panic, within the limit, best first.
func FuzzSearch(f *testing.F) {
	ix := Build(catalog, DefaultOptions())
	for _, s := range []string{"list pull requests", "PRs", "x@y.z", "a/b.c", "HTTPServer", "\xff\xfe", "on call on call"} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, q string, limit int) {
		limit = limit%20 + 1
		if limit < 1 {
			limit = 1
		}
		hits := ix.Search(q, limit, nil)
		if len(hits) > limit {
			t.Fatalf("%d hits for limit %d", len(hits), limit)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Fatalf("out of order: %v", hits)
			}
		}
	})
}

// TestPhrasesKeepTheirStopWords: "open a => create new" expands the
// phrase, never "open" alone, though "a" is a stop word.
func TestPhrasesKeepTheirStopWords(t *testing.T) {
	th := thesaurusFor(true)
	if exp := th.expand["open"]; len(exp) > 0 {
		t.Errorf("open alone expands to %v", exp)
	}
	if exp := th.phrases["open a"]; !slices.Contains(exp, "creat") {
		t.Errorf(`"open a" expands to %v`, exp)
	}
	ix := Build(catalog, DefaultOptions())
	cs, _ := ix.concepts("show the open PRs")
	for _, c := range cs {
		if c[0].term == "creat" {
			t.Errorf("a concept %v from a phrase the query does not hold", c)
		}
	}
}

// TestProductsAndTroubles: a query that names another product of a kind
// ("Splunk" for logs), or a trouble instead of its remedy ("charged
// twice"), finds the tool of that kind through the thesaurus's Products
// and Troubles sections: without the thesaurus (and the word vectors, which
// guess right in a catalog this small) the tool is not first.
func TestProductsAndTroubles(t *testing.T) {
	docs := []Doc{
		{Name: "datadog__search_logs", Description: "Search log events by query and time range."},
		{Name: "gmail__send_email", Description: "Send an email."},
		{Name: "slack__post_message", Description: "Post a message to a channel."},
		{Name: "stripe__create_refund", Description: "Refund a payment intent."},
		{Name: "cloudflare__purge_cache", Description: "Purge cached files from the CDN."},
		{Name: "k8s__scale_deployment", Description: "Set the number of replicas of a deployment."},
		{Name: "vault__rotate_secret", Description: "Rotate a secret to a new value."},
		{Name: "github__get_file", Description: "Get a file's contents from a repository."},
	}
	on := Build(docs, DefaultOptions())
	o := DefaultOptions()
	o.Thesaurus, o.Dense = false, false
	off := Build(docs, o)
	first := func(ix *Index, q string) string {
		if hits := ix.Search(q, 1, nil); len(hits) > 0 {
			return docs[hits[0].Doc].Name
		}
		return ""
	}
	for _, tc := range []struct{ query, want string }{
		{"is it in Splunk", "datadog__search_logs"},
		{"write to them from my Hotmail", "gmail__send_email"},
		{"she was charged twice for one order", "stripe__create_refund"},
		{"visitors still see the old banner", "cloudflare__purge_cache"},
		{"the web pods can't keep up", "k8s__scale_deployment"},
		{"our API key leaked", "vault__rotate_secret"},
	} {
		if got := first(on, tc.query); got != tc.want {
			t.Errorf("%q: %q first, want %s", tc.query, got, tc.want)
		}
		if got := first(off, tc.query); got == tc.want {
			t.Errorf("%q: %s first without the thesaurus: the case tests nothing", tc.query, got)
		}
	}
}
