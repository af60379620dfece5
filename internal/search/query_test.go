package search

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		in                    string
		text, values, negated string
		hints                 []string
	}{
		{in: "put a meeting on the calendar, not an incident", text: "put a meeting on the calendar,", negated: "an incident"},
		{in: "write the email but don't send it yet", text: "write the email but", negated: "send it yet"},
		{in: "stop the container but do not remove it", text: "stop the container but", negated: "remove it"},
		{in: "disable the account without deleting it", text: "disable the account", negated: "deleting it"},
		{in: "resolve it, not just acknowledge it, and close the page", text: "resolve it, , and close the page", negated: "just acknowledge it"},
		// a long clause describes; "won't" asks about a failure
		{in: "this is not the kind of thing that I would ever want to see here", text: "this is the kind of thing that I would ever want to see here"},
		{in: "why won't my pod get scheduled", text: "why won't my pod get scheduled"},
		{in: "what has been said in the #incidents channel", text: "what has been said in the channel", values: "#incidents", hints: []string{"channel"}},
		{in: `find the "Q3 plan" doc`, text: "find the doc", values: "Q3 plan"},
		{in: "move PROJ-42 to done", text: "move to done", values: "PROJ-42"},
		{in: "email the report to finance@example.com", text: "email the report to", values: "finance@example.com", hints: []string{"email"}},
		{in: "download reports/q3.csv", text: "download", values: "reports/q3.csv", hints: []string{"file"}},
		{in: "ask @dana to review", text: "ask to review", values: "@dana", hints: []string{"user"}},
		{in: `an "unclosed quote`, text: `an "unclosed quote`},
	} {
		p := parseQuery(tc.in)
		norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
		if norm(p.text) != norm(tc.text) || norm(p.values) != norm(tc.values) || norm(p.negated) != norm(tc.negated) ||
			!slices.Equal(p.hints, tc.hints) {
			t.Errorf("parseQuery(%q) = text %q values %q negated %q hints %q", tc.in, norm(p.text), norm(p.values), norm(p.negated), p.hints)
		}
	}
}

// TestNegationRanks: a query that excludes a neighbour ranks the tool it
// asks for first, which it does not without reading the query.
func TestNegationRanks(t *testing.T) {
	docs := []Doc{
		{Name: "jira__create_issue", Description: "Create a new Jira issue (ticket) in a project."},
		{Name: "jira__add_comment", Description: "Add a comment to a Jira issue (ticket)."},
		{Name: "gmail__send_email", Description: "Send an email."},
		{Name: "gmail__create_draft", Description: "Create a draft email without sending it."},
	}
	for _, tc := range []struct{ query, want string }{
		{"comment on the Jira ticket, not a new one", "jira__add_comment"},
		{"a Jira ticket, not a comment", "jira__create_issue"},
		{"an email, but don't send it", "gmail__create_draft"},
	} {
		hits := Build(docs, DefaultOptions()).Search(tc.query, 3, nil)
		if len(hits) == 0 || docs[hits[0].Doc].Name != tc.want {
			t.Errorf("%q: %v, want %s first", tc.query, hits, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"github", "githib", 2, 1},
		{"list", "lsit", 2, 1}, // a swap is one edit
		{"issu", "isu", 2, 1},
		{"kitten", "sitting", 5, 3},
		{"abc", "xyz", 1, 2}, // past the limit
		{"", "abc", 5, 3},
	} {
		if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
	}
}

// TestTypos: a misspelt word is read as the index term it misspells.
func TestTypos(t *testing.T) {
	ix := Build(catalog, DefaultOptions())
	hits := ix.Search("githib pul requets", 1, nil)
	if len(hits) == 0 || catalog[hits[0].Doc].Name != "github__list_pull_requests" {
		t.Errorf("githib pul requets: %v", hits)
	}
	o := DefaultOptions()
	o.Typos, o.Dense = false, false
	if hits := Build(catalog, o).Search("githib", 1, nil); len(hits) != 0 {
		t.Errorf("without typo tolerance, githib matched %v", hits)
	}
}

// TestCompounds: a word nothing knows that is two words run together is
// read as the parts tools hold; without Compounds it matches nothing.
func TestCompounds(t *testing.T) {
	docs := []Doc{
		{Name: "grep", Description: "Search file contents with a regular expression."},
		{Name: "read_file", Description: "Read a text file."},
		{Name: "docusign__send_envelope", Description: "Send documents to recipients for signature."},
		{Name: "mongodb__find", Description: "Find documents in a collection."},
	}
	ix := Build(docs, DefaultOptions())
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"ripgrep", []string{"grep"}},
		{"findstr", []string{"find"}},
		{"filegrep", []string{"file", "grep"}},
		{"zzzzzzz", nil},
		{"grep", nil}, // too short to hold two parts
		{"ab€grep", []string{"grep"}},
		{"€€€€€€", nil},
	} {
		if got := ix.compoundParts(tc.word); !slices.Equal(got, tc.want) {
			t.Errorf("compoundParts(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	for _, tc := range []struct{ query, want string }{
		{"ripgrep the codebase for TODO", "grep"},
		{"findstr the orders", "mongodb__find"},
	} {
		hits := ix.Search(tc.query, 1, nil)
		if len(hits) == 0 || docs[hits[0].Doc].Name != tc.want {
			t.Errorf("%q: %v, want %s first", tc.query, hits, tc.want)
		}
	}
	o := DefaultOptions()
	o.Compounds, o.Dense = 0, false
	if hits := Build(docs, o).Search("ripgrep", 1, nil); len(hits) != 0 {
		t.Errorf("without Compounds, ripgrep matched %v", hits)
	}
}

// FuzzParseQuery: any query parses, its parts are made of the query's
// text, and a search of it never fails.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"a meeting, not an incident", `the "Q3" file reports/q3.csv`, "#x @y PROJ-1 don't", "“curly” quotes", "\xff not"} {
		f.Add(s)
	}
	ix := Build(catalog, DefaultOptions())
	f.Fuzz(func(t *testing.T, q string) {
		if len(q) > 1000 {
			return
		}
		p := parseQuery(q)
		if utf8.ValidString(q) && (!utf8.ValidString(p.text) || !utf8.ValidString(p.negated) || !utf8.ValidString(p.values)) {
			t.Errorf("parseQuery(%q) split a character: %+v", q, p)
		}
		if len(p.text)+len(p.values)+len(p.negated) > 2*len(q)+8 {
			t.Errorf("parseQuery(%q) grew: %+v", q, p)
		}
		for _, h := range ix.Search(q, 5, nil) {
			if h.Doc < 0 || h.Doc >= len(catalog) {
				t.Errorf("hit %v", h)
			}
		}
	})
}
