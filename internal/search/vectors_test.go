package search

import "testing"

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
