package search

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestVectorTable: the embedded table parses, and its vectors mean what
// the words do: a word is nearer its neighbours in meaning than an
// unrelated word.
func TestVectorTable(t *testing.T) {
	vt, err := vectors()
	if err != nil {
		t.Fatal(err)
	}
	if vt.dims != 100 || len(vt.rows) < 50000 {
		t.Fatalf("%d dimensions, %d terms", vt.dims, len(vt.rows))
	}
	cos := func(a, b string) float32 {
		x, y := make([]float32, vt.dims), make([]float32, vt.dims)
		if !vt.add(x, a, 1) || !vt.add(y, b, 1) {
			t.Fatalf("%q or %q is not in the table", a, b)
		}
		normalize(x)
		normalize(y)
		var s float32
		for i := range x {
			s += x[i] * y[i]
		}
		return s
	}
	for _, tc := range []struct{ word, near, far string }{
		{"money", "payment", "calendar"},
		{"meet", "schedul", "databas"}, // terms are stems
		{"refund", "payment", "contain"},
		{"email", "mail", "kubernet"},
	} {
		if _, ok := vt.rows[tc.far]; !ok {
			tc.far = "weather"
		}
		if n, f := cos(tc.word, tc.near), cos(tc.word, tc.far); n <= f || n < 0.4 {
			t.Errorf("%s: %s %.2f, %s %.2f", tc.word, tc.near, n, tc.far, f)
		}
	}
}

func TestParseVectorsRefuses(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"no header", "hello"},
		{"bad version", "toold-wordvectors 2 2 1\na\n\x01\x02"},
		{"bad dims", "toold-wordvectors 1 0 1\na\n"},
		{"short terms", "toold-wordvectors 1 2 2\na\n"},
		{"short vectors", "toold-wordvectors 1 2 2\na\nb\n\x01\x02\x03"},
	} {
		if _, err := parseVectors([]byte(tc.data)); err == nil {
			t.Errorf("%s: parsed", tc.name)
		}
	}
	vt, err := parseVectors([]byte("toold-wordvectors 1 2 2\na\nb\n\x01\x02\x03\xfc"))
	if err != nil || len(vt.rows) != 2 || vt.rows["b"] != 1 {
		t.Fatalf("%v %+v", err, vt)
	}
}

// TestDenseFindsWhatNoWordShares: the word vectors find the tool a query
// means when the query shares no word with it, nor with the thesaurus's
// relations of its words; the lexical ranking alone finds nothing.
func TestDenseFindsWhatNoWordShares(t *testing.T) {
	docs := []Doc{
		{Name: "quickbooks__profit_and_loss_report", Description: "Run the profit and loss report for a period."},
		{Name: "zoom__create_meeting", Description: "Create a Zoom meeting for a user."},
		{Name: "gmaps__directions", Description: "Get driving, walking or transit directions between two places."},
		{Name: "kafka__produce", Description: "Produce a message to a topic."},
	}
	lexical := DefaultOptions()
	lexical.Dense = false
	for _, tc := range []struct{ query, want string }{
		{"revenue this year", "quickbooks__profit_and_loss_report"},
		{"how far is the airport", "gmaps__directions"},
		{"videoconference", "zoom__create_meeting"},
	} {
		hits := Build(docs, DefaultOptions()).Search(tc.query, 2, nil)
		if len(hits) == 0 || docs[hits[0].Doc].Name != tc.want {
			t.Errorf("%q: %v, want %s first", tc.query, hits, tc.want)
		}
		if hits := Build(docs, lexical).Search(tc.query, 2, nil); len(hits) != 0 {
			t.Errorf("%q: the lexical ranking found %v", tc.query, hits)
		}
	}
}

// TestFusionSkipsOnlyWhatCannotRank: the linear fusion reads a tool's
// vector only when its words could still place it among the first limit;
// for every query of the evaluation set, the first five it answers are the
// first five of the ranking that reads every tool's vector (a search for
// every tool reads them all).
func TestFusionSkipsOnlyWhatCannotRank(t *testing.T) {
	docs := largeCatalog(t, 327) // catalog.txt, each tool once
	b, err := os.ReadFile("../../bench/search/testdata/queries.txt")
	if err != nil {
		t.Fatal(err)
	}
	queries := append(slices.Clone(benchQueries), scanQueries...)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, " | ", 3); len(f) == 3 && !strings.HasPrefix(line, "#") {
			queries = append(queries, f[2])
		}
	}
	if len(queries) < 200 {
		t.Fatalf("%d queries", len(queries))
	}
	for _, w := range []float64{DefaultOptions().DenseWeight, 0.3, 0.6} {
		o := DefaultOptions()
		o.DenseWeight = w
		checkFusion(t, Build(docs, o), docs, queries)
	}
}

func checkFusion(t *testing.T, ix *Index, docs []Doc, queries []string) {
	t.Helper()
	for _, limit := range []int{1, 5} {
		for _, q := range queries {
			got, all := ix.Search(q, limit, nil), ix.Search(q, len(docs), nil)
			all = all[:min(limit, len(all))]
			if len(got) != len(all) {
				t.Fatalf("%q: %d hits, want %d", q, len(got), len(all))
			}
			for i := range got {
				if got[i].Score != all[i].Score {
					t.Errorf("weight %.1f, %q, limit %d: hit %d is %s %.4f, want %s %.4f", ix.opts.DenseWeight, q, limit, i,
						docs[got[i].Doc].Name, got[i].Score, docs[all[i].Doc].Name, all[i].Score)
				}
			}
		}
	}
}
