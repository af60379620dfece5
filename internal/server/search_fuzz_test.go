package server

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toold/toold/internal/registry"
)

// FuzzSearchParams: the search route's and the listing's parsers of
// untrusted input (q, limit, call_id, defer_loading, If-None-Match) answer
// every input, accept only what they promise, and refuse with a message
// that names the parameter and a suggestion.
func FuzzSearchParams(f *testing.F) {
	for _, s := range []string{"", "list pull requests", "5", "51", "toolu_01A", "x y", "true", "TRUE", "0", `"abc", W/"def"`, "*", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if q, terr := parseQuery(v); terr == nil && (q == "" || len(q) > maxQueryBytes || !utf8.ValidString(q)) {
			t.Fatalf("q %q accepted", v)
		} else if terr != nil && (terr.Suggestion == "" || !strings.Contains(terr.Message, "q")) {
			t.Fatalf("q refusal %+v", terr)
		}
		if n, terr := parseSearchLimit(v); terr == nil && (n < 1 || n > 50) {
			t.Fatalf("limit %q gave %d", v, n)
		}
		if id, terr := parseCallID(v); terr == nil && id != "" && (len(id) > 128 || !idChars(id)) {
			t.Fatalf("call_id %q accepted", v)
		}
		if d, terr := parseDeferLoading(v, registry.OpenAI); d || terr == nil && v != "" && v != "0" && !strings.EqualFold(v, "false") {
			t.Fatalf("defer_loading %q with openai: %v %v", v, d, terr)
		}
		r := &http.Request{Header: http.Header{"If-None-Match": {v}}}
		if notModified(r, `"etag"`) && !strings.Contains(v, `"etag"`) && !strings.Contains(v, "*") {
			t.Fatalf("If-None-Match %q matched", v)
		}
	})
}
