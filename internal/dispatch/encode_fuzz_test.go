package dispatch

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// FuzzEnvelopeJSON holds the hand-written envelope encoders to
// encoding/json with every field filled from the fuzzer's input: the
// strings (any bytes, invalid UTF-8 and control characters included), the
// numbers, the flags, the principal and the structured parts. AppendJSON
// must write the JSON value encoding/json writes (the same members with
// the same values, numbers compared as written; the member order and the
// escaping of <, > and & may differ), and AppendBookkeeping exactly the
// members it names, as AppendJSON writes them.
func FuzzEnvelopeJSON(f *testing.F) {
	f.Add("abc", "echo", `{"a":[1,"x"]}`, "<msg> & \"q\"\n", "u\u2028é\xff", 1.234, 0.002, 1e-9, int64(1764230400123456789), 3, true)
	f.Add("", "", "", "", "", 0.0, 0.0, 0.0, int64(0), 0, false)
	f.Add("r\x01", "t", "not json", "m", "n", 123456.5, 1e21, 7.25, int64(-1), -2, true)
	f.Fuzz(func(t *testing.T, s1, s2, data, s3, s4 string, f1, f2, f3 float64, nanos int64, n int, flag bool) {
		env := filledEnvelope(s1, s2, data, s3, s4, f1, f2, f3, nanos, n, flag)
		if env == nil {
			t.Skip("a duration no call can take (NaN, infinite)")
		}
		want, err := json.Marshal((*plain)(env))
		if err != nil {
			t.Skip("encoding/json refuses it too:", err)
		}
		sameJSON(t, "AppendJSON", want, env.AppendJSON(nil))
		checkBookkeeping(t, env)
	})
}

// filledEnvelope is an envelope with every field set from the fuzzer's
// values; nil when a number is not one a duration can be.
func filledEnvelope(s1, s2, data, s3, s4 string, f1, f2, f3 float64, nanos int64, n int, flag bool) *Envelope {
	for _, f := range []float64{f1, f2, f3} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
	}
	f1, f2, f3 = math.Abs(f1), math.Abs(f2), math.Abs(f3)
	// Data reaches the encoder as the sanitizer returns it: valid,
	// compact JSON (encoding/json compacts a RawMessage; AppendJSON
	// copies it).
	raw, _ := json.Marshal(data)
	if json.Valid([]byte(data)) {
		var c bytes.Buffer
		_ = json.Compact(&c, []byte(data))
		raw = c.Bytes()
	}
	errBody := &ErrorBody{Type: tools.ValidationError, Code: tools.Code(s2), Message: s3, Suggestion: s4,
		Fields: []tools.FieldError{{Pointer: "/" + s1, Message: s3}}, Example: raw, Retryable: flag, RetryAfterMS: int64(n)}
	return &Envelope{
		RequestID: s1, Tool: s2, Status: Status(s3), Success: flag, Data: raw, Error: errBody,
		DurationMS: f1, Timing: Timing{QueuedMS: f2, ExecuteMS: f3, SanitizeMS: f1, Attempts: n, WaitMS: f2},
		StartedAt:   time.Unix(0, nanos).UTC(),
		Sanitized:   sanitize.Report{Redactions: n, ByKind: map[string]int{s4: n}, Truncated: flag, OriginalBytes: n, Notes: []string{s3}},
		ExecutionID: s4, Redundant: flag,
		FallbackFrom: []FallbackStep{{Tool: s2, Status: Status(s1), Error: errBody, DurationMS: f3}},
		Waiting:      &Waiting{For: s3, Request: raw, ExpiresAt: time.Unix(0, nanos).UTC(), Resume: s1},
		TraceID:      s3,
		Principal: &auth.Identity{Kind: s1, Name: s2, Issuer: s3, Subject: s4, Client: s1, Actor: s2,
			Narrowed: flag, Narrow: []string{s3, s4}},
		Artifact: &Artifact{ID: s1, URI: s2, Bytes: int64(n), OmittedBytes: int64(n), ExpiresAt: time.Unix(0, nanos).UTC()},
	}
}

// checkBookkeeping: AppendBookkeeping writes exactly the members of the
// envelope it names, as AppendJSON (held to encoding/json above) writes
// them, in the envelope's order.
func checkBookkeeping(t *testing.T, env *Envelope) {
	t.Helper()
	full := env.AppendJSON(nil)
	var members map[string]json.RawMessage
	if err := json.Unmarshal(full, &members); err != nil {
		t.Fatalf("AppendJSON wrote invalid JSON: %v\n%s", err, full)
	}
	want := []byte{'{'}
	for _, k := range []string{"request_id", "status", "duration_ms", "timing", "started_at", "sanitized", "trace_id", "principal", "artifact"} {
		if v, ok := members[k]; ok {
			if len(want) > 1 {
				want = append(want, ',')
			}
			want = append(append(append(want, '"'), k...), '"', ':')
			want = append(want, v...)
		}
	}
	want = append(want, '}')
	if got := env.AppendBookkeeping(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendBookkeeping differs from the envelope's members:\n got %s\nwant %s", got, want)
	}
}

// sameJSON fails unless got is valid JSON holding the value want holds,
// numbers compared digit for digit.
func sameJSON(t *testing.T, what string, want, got []byte) {
	t.Helper()
	w, err := decodeNumbers(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := decodeNumbers(got)
	if err != nil {
		t.Fatalf("%s wrote invalid JSON: %v\n%s", what, err, got)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Fatalf("%s differs from encoding/json (-want +got):\n%s", what, diff)
	}
}

func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}
