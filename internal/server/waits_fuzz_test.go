package server

import (
	"encoding/json"
	"testing"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// FuzzParseResume: a resumption body is accepted only as exactly one of
// answer or result, holding valid JSON; everything else is refused with
// invalid_json and a suggestion.
func FuzzParseResume(f *testing.F) {
	for _, s := range []string{`{"answer":"red"}`, `{"result":{"count":3}}`, `{"answer":1,"result":2}`, `{}`, `{"answer":null}`,
		`{"answer":"x","extra":1}`, `not json`, `{"answer":"\ud800"}`, `{"result":[1,2,`, ``, `{"answer":"a"}{"answer":"b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		kind, value, terr := parseResume(body, strictjson.DefaultMaxDepth)
		if terr != nil {
			if terr.Code != "invalid_json" || terr.Suggestion == "" || kind != "" || value != nil {
				t.Errorf("%q: %+v", body, terr)
			}
			return
		}
		if kind != tools.WaitInput && kind != tools.WaitSubtask {
			t.Errorf("%q: kind %q", body, kind)
		}
		if !json.Valid(value) {
			t.Errorf("%q: accepted an answer that is not JSON: %q", body, value)
		}
	})
}

// FuzzParseDecision: a decision is accepted only with approve set and a
// bounded reason.
func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{`{"approve":true}`, `{"approve":false,"reason":"not today"}`, `{"approve":"yes"}`, `{"reason":"x"}`,
		`{"approve":null}`, `{"approve":true,"by":"me"}`, `[]`, ``, `{"approve":true,"reason":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		approve, reason, terr := parseDecision(body)
		if terr != nil {
			if terr.Code != "invalid_json" || terr.Suggestion == "" || approve || reason != "" {
				t.Errorf("%q: %+v", body, terr)
			}
			return
		}
		if len(reason) > maxReason {
			t.Errorf("%q: a reason of %d bytes accepted", body, len(reason))
		}
		var probe struct{ Approve *bool }
		if err := json.Unmarshal(body, &probe); err != nil || probe.Approve == nil || *probe.Approve != approve {
			t.Errorf("%q: accepted as approve=%v", body, approve)
		}
	})
}
