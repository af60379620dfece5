package dispatch

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/encodetest"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// plain has the envelope's fields without its MarshalJSON: what
// encoding/json writes for them is the reference AppendJSON must match.
type plain Envelope

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	started := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	tests := []Envelope{
		{RequestID: "abc", Tool: "echo", Status: StatusSuccess, Success: true, Data: json.RawMessage(`{"a":[1,"x"]}`),
			DurationMS: 1.234, Timing: Timing{QueuedMS: 0.002, ExecuteMS: 1.2, SanitizeMS: 0.031}, StartedAt: started},
		{RequestID: "r", Tool: "weird \"<tool>\"\n\x01\u2028é\xff", Status: StatusRejected,
			Error: &ErrorBody{Type: tools.ValidationError, Code: "invalid_json", Message: "bad <json> & more", Suggestion: "s",
				Fields: []tools.FieldError{{Pointer: "/a", Message: "m"}}, Example: json.RawMessage(`{"x":1}`), Retryable: false},
			DurationMS: 1e-9, StartedAt: started},
		{RequestID: "r", Status: StatusError, Error: &ErrorBody{Type: tools.OverloadError, RetryAfterMS: 1200, Retryable: true},
			DurationMS: 123456.5, StartedAt: started,
			Sanitized: sanitize.Report{Redactions: 2, ByKind: map[string]int{"email": 2}, Truncated: true, OriginalBytes: 9, Notes: []string{"n"}}},
		{RequestID: "f", Tool: "backup", Status: StatusSuccess, Success: true, Data: json.RawMessage(`"x"`), StartedAt: started,
			Timing: Timing{ExecuteMS: 12.5, Attempts: 3, WaitMS: 7.25},
			FallbackFrom: []FallbackStep{{Tool: "primary", Status: StatusTimeout, DurationMS: 10,
				Error: &ErrorBody{Type: tools.SystemError, Code: "upstream_unavailable", Message: "down", Retryable: true, RetryAfterMS: 5}}}},
		{RequestID: "r", Tool: "echo", Status: StatusPending, StartedAt: started, ExecutionID: "0195e\"x", Redundant: true},
		{RequestID: "t", Tool: "echo", Status: StatusSuccess, Success: true, StartedAt: started,
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", TraceSampled: true},
		{RequestID: "p", Tool: "echo", Status: StatusSuccess, Success: true, StartedAt: started,
			Principal: &auth.Identity{Kind: auth.KindToken, Name: "u-1@https://idp.test/", Issuer: "https://idp.test/", Subject: "u-1",
				Client: "agent \"<x>\"", Actor: "backend", Narrowed: true, Narrow: []string{"read_*"}, Groups: []string{"ops", "on-call \"<x>\""}}},
		{RequestID: "k", Principal: &auth.Identity{Kind: auth.KindKey, Name: "ops"}},
		{},
	}
	for i, env := range tests {
		want, err := json.Marshal((*plain)(&env))
		if err != nil {
			t.Fatal(err)
		}
		got := env.AppendJSON(nil)
		var w, g any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%d: AppendJSON wrote invalid JSON: %v\n%s", i, err, got)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%d: (-encoding/json +AppendJSON):\n%s", i, diff)
		}
	}
}

// TestAddMillis: a sum of phase durations reads as a whole number of
// microseconds in the envelope.
func TestAddMillis(t *testing.T) {
	cases := []struct {
		ms   float64
		d    time.Duration
		want string
	}{
		{0.037, 47 * time.Microsecond, "0.084"},
		{0, 1500 * time.Nanosecond, "0.001"},
		{1.1, 200 * time.Microsecond, "1.3"},
	}
	for _, c := range cases {
		if got := string(appendFloat(nil, addMillis(c.ms, c.d))); got != c.want {
			t.Errorf("addMillis(%v, %v) = %s, want %s", c.ms, c.d, got, c.want)
		}
	}
}

// TestAppendJSONEveryField (issue 38, item 7): AppendJSON writes what
// encoding/json writes for an envelope with every field filled by
// reflection, each field alone, and every field but one — so a field
// added to Envelope (or to a type it holds) fails here until AppendJSON
// writes it. AppendBookkeeping is held to AppendJSON on the same values.
func TestAppendJSONEveryField(t *testing.T) {
	for _, v := range encodetest.Variants[Envelope](t) {
		want, err := json.Marshal((*plain)(v.Value))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		encodetest.Same(t, v.Name, want, v.Value.AppendJSON(nil))
		checkBookkeeping(t, v.Value)
	}
}
