package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// echoToken has the shape of a GitHub token, which the sanitizer detects:
// a caller (or a model, or a page the model read) that puts a secret into a
// request must never get it back from a refusal.
const echoToken = "ghp_Zq8XcV2bN4mL6kJ9hG3fD5sA7pO1iU0yTr2w"

// TestRefusalsEchoNoSecret drives every place a refusal used to repeat what
// the caller sent — a field pointer, an unknown tool's name, a route, a
// header's value, a request id, a query parameter, an execution id — with a
// secret-shaped token, over HTTP against the real server, with and without
// keys. The token must not come back in the body or in any header.
func TestRefusalsEchoNoSecret(t *testing.T) {
	tok := echoToken
	open := newHarness(t, harnessOpts{store: true})
	keyed, _ := storeHarness(t, harnessOpts{keys: roleKeys})
	tests := []struct {
		name   string
		h      *harness
		method string
		path   string
		body   string
		header map[string]string
		status int
	}{
		{"field pointer", open, "POST", "/tools/echo/execute", `{"message":"x","data":{"a":1},"` + tok + `":1}`, nil, 400},
		{"nested field pointer", open, "POST", "/tools/sleep/execute", `{"ms":"` + tok + `"}`, nil, 400},
		{"unknown tool, execute", open, "POST", "/tools/" + tok + "/execute", `{}`, nil, 404},
		{"unknown tool, listing", open, "GET", "/tools/" + tok, "", nil, 404},
		{"unknown tool, schema", open, "GET", "/tools/" + tok + "/schema", "", nil, 404},
		{"no route", open, "GET", "/" + tok, "", nil, 404},
		{"no route, query", open, "GET", "/nowhere?q=" + tok, "", nil, 404},
		{"method not allowed", open, "PUT", "/tools/" + tok, "", nil, 405},
		{"Toold-Timeout", open, "POST", "/tools/echo/execute", `{"message":"x"}`, map[string]string{"Toold-Timeout": tok}, 400},
		{"X-Request-ID", open, "POST", "/tools/echo/execute", `{"message":"x"}`, map[string]string{"X-Request-ID": tok}, 200},
		{"X-Request-ID on a refusal", open, "GET", "/nowhere", "", map[string]string{"X-Request-ID": tok}, 404},
		{"?format=", open, "GET", "/tools?format=" + tok, "", nil, 400},
		{"Content-Type", open, "POST", "/tools/echo/execute", `{"message":"x"}`, map[string]string{"Content-Type": "text/" + tok}, 415},
		{"Origin", open, "GET", "/tools", "", map[string]string{"Origin": "https://" + tok + ".example"}, 403},
		{"Host", open, "GET", "/tools", "", map[string]string{"Host": tok + ".example"}, 403},
		{"Toold-Turn", open, "POST", "/tools/echo/execute", `{"message":"x"}`, map[string]string{"Toold-Turn": tok}, 200},
		{"Idempotency-Key", open, "POST", "/tools/echo/execute", `{"message":"x"}`, map[string]string{"Idempotency-Key": tok}, 200},
		{"Prefer", open, "POST", "/tools/echo/execute", `{"message":"x"}`, map[string]string{"Prefer": "wait=" + tok}, 400},
		{"execution id", keyed, "GET", "/executions/" + tok, "", hdr(), 404},
		{"execution id, cancel", keyed, "DELETE", "/executions/" + tok, "", hdr(), 404},
		{"execution id, events", keyed, "GET", "/executions/" + tok + "/events", "", hdr(), 404},
		{"execution id, resume", keyed, "POST", "/executions/" + tok + "/resume", `{"answer":1}`, hdr(), 404},
		{"execution cursor", keyed, "GET", "/executions?cursor=" + tok, "", hdr(), 400},
		{"async submit, unknown tool", keyed, "POST", "/executions", `{"tool":"` + tok + `","arguments":{}}`, hdr(), 404},
		{"batch, unknown tool", keyed, "POST", "/batch", `{"calls":[{"tool":"` + tok + `","arguments":{}}]}`, hdr(), 200},
		{"batch, skipped call", keyed, "POST", "/batch",
			`{"stop_on_error":true,"calls":[{"tool":"fail","arguments":{"kind":"user"}},{"tool":"` + tok + `","arguments":{}}]}`, hdr(), 200},
		{"batch, call id", keyed, "POST", "/batch", `{"calls":[{"id":"` + tok + `","tool":"echo","arguments":{"message":"x"}}]}`, hdr(), 400},
		{"approval id", open, "POST", "/approvals/" + tok, `{"approve":true}`, nil, 404},
		{"key", keyed, "GET", "/tools", "", bearer(tok), 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := tc.h.do(tc.method, tc.path, body, tc.header)
			if r.status != tc.status {
				t.Errorf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			assertNoToken(t, r.header, r.body)
		})
	}
}

// assertNoToken fails when echoToken, or its distinctive tail (in case a
// prefix was cut), or either URL-encoded, is in the headers or the body.
func assertNoToken(t *testing.T, header http.Header, body []byte) {
	t.Helper()
	tail := echoToken[12:]
	for _, s := range []string{echoToken, tail, url.PathEscape(echoToken), url.QueryEscape(tail)} {
		if strings.Contains(string(body), s) {
			t.Errorf("the token came back in the body: %s", body)
			return
		}
		for k, vs := range header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					t.Errorf("the token came back in the header %s: %q", k, v)
					return
				}
			}
		}
	}
}

// FuzzRequestID: whatever a client sends as X-Request-ID, the id toold
// uses (in the header, every envelope, every log line) is well-formed and
// holds nothing the sanitizer would redact; a well-formed, clean id is
// kept as sent, and anything else is replaced by a fresh one.
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{"", "client-id-1", "turn:42.a_b", echoToken, "a b", strings.Repeat("x", 129),
		"AKIAIOSFODNN7EXAMPLE", "sk-proj-" + strings.Repeat("a", 40), "ghp_\u200bZq8XcV2bN4mL6kJ9hG3fD5sA7pO1iU0yTr2w", "\x00", "é"} {
		f.Add(s)
	}
	srv := newBareServer(f)
	f.Fuzz(func(t *testing.T, sent string) {
		id := srv.requestID(sent)
		if !validRequestID(id) || srv.opts.Dispatcher.RedactText(id) != id {
			t.Fatalf("sent %q: toold uses %q", sent, id)
		}
		if kept := id == sent; kept != (validRequestID(sent) && srv.opts.Dispatcher.RedactText(sent) == sent) {
			t.Fatalf("sent %q: kept %v", sent, kept)
		}
		if id != sent && len(id) != 24 {
			t.Fatalf("sent %q: replaced by %q, not a fresh id", sent, id)
		}
	})
}
