package server

import (
	"strings"
	"testing"

	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/tools"
)

// TestAcceptedWorkIsCharged (issue 38, item 12): everything a caller
// makes toold accept or compute is charged its principal's rate
// (auth.limits) when it is accepted — each call of an async batch, a
// search — as a single async call is: once the bucket is empty, an async
// batch and a search are refused 429 principal_rate with Retry-After,
// and a batch larger than the burst is refused saying so. Another
// principal's bucket is its own.
func TestAcceptedWorkIsCharged(t *testing.T) {
	// A burst of 4 and a rate that refills nothing within the test.
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys, principals: limits.PrincipalConfig{Rate: 0.001, Burst: 4}})
	batch := func(n int) []byte {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = `{"tool":"echo","arguments":{"message":"x"}}`
		}
		return []byte(`{"calls":[` + strings.Join(calls, ",") + `]}`)
	}
	async := hdr("Prefer", "respond-async")
	steps := []struct {
		name   string
		method string
		path   string
		body   []byte
		header map[string]string
		status int
		says   string
	}{
		{"a batch larger than the burst", "POST", "/batch", batch(5), async, 429, "more than the 4"},
		{"an async batch of two", "POST", "/batch", batch(2), async, 202, ""},
		{"a search", "GET", "/tools/search?q=echo", nil, hdr(), 200, ""},
		{"an async batch of two, one left", "POST", "/batch", batch(2), async, 429, "calls per second"},
		{"a single async call", "POST", "/tools/echo/execute", []byte(`{"message":"x"}`), async, 202, ""},
		{"a search, none left", "GET", "/tools/search?q=echo", nil, hdr(), 429, "calls per second"},
		{"an async batch of one, none left", "POST", "/batch", batch(1), async, 429, "calls per second"},
		{"another principal's search", "GET", "/tools/search?q=echo", nil, bearer(keyBob), 200, ""},
		{"another principal's batch", "POST", "/batch", batch(3), bearer(keyBob, "Prefer", "respond-async"), 202, ""},
	}
	for _, s := range steps {
		r := h.do(s.method, s.path, s.body, s.header)
		if r.status != s.status || !strings.Contains(string(r.body), s.says) {
			t.Fatalf("%s: %d %s, want %d", s.name, r.status, r.body, s.status)
		}
		if s.status == 429 && (r.env.Error == nil || r.env.Error.Code != tools.CodePrincipalRate) {
			t.Errorf("%s: refused with %s, want %s", s.name, r.body, tools.CodePrincipalRate)
		}
		if s.status == 429 && s.says == "calls per second" && r.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", s.name)
		}
	}
}
