package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

func TestExecuteSuccess(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.exec("echo", `{"message":"héllo"}`, map[string]string{"X-Request-ID": "client-id-1"})
	if r.status != 200 || r.env.Status != dispatch.StatusSuccess || !r.env.Success || r.env.Error != nil {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	if r.env.RequestID != "client-id-1" || r.header.Get("X-Request-ID") != "client-id-1" {
		t.Errorf("request id not honoured: envelope %q, header %q", r.env.RequestID, r.header.Get("X-Request-ID"))
	}
	var data struct {
		Message string
		Length  int
	}
	if err := json.Unmarshal(r.env.Data, &data); err != nil || data.Message != "héllo" || data.Length != 6 {
		t.Errorf("data = %s (%v)", r.env.Data, err)
	}
	if r.env.Tool != "echo" || r.env.StartedAt.IsZero() || r.env.DurationMS <= 0 {
		t.Errorf("envelope metadata incomplete: %s", r.body)
	}
}

func TestArgumentsWrapper(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.exec("echo", `{"arguments":{"message":"wrapped"}}`, nil)
	if r.status != 200 || !strings.Contains(string(r.env.Data), `"wrapped"`) {
		t.Fatalf("got %d %s", r.status, r.body)
	}
}

func TestRequestIDGenerated(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, sent := range []string{"", "has space", strings.Repeat("x", 129), "a\"b"} {
		r := h.exec("echo", `{"message":"x"}`, map[string]string{"X-Request-ID": sent})
		id := r.header.Get("X-Request-ID")
		if id == sent || len(id) != 24 || r.env.RequestID != id {
			t.Errorf("sent %q: got header %q, envelope %q", sent, id, r.env.RequestID)
		}
	}
}

// TestBadInput feeds the worst requests we can think of; each must get the
// envelope with the right status and a message a model can act on, and the
// server must keep serving.
func TestBadInput(t *testing.T) {
	h := newHarness(t, harnessOpts{maxBody: 64 << 10})
	tests := []struct {
		name, tool, body string
		header           map[string]string
		status           int
		errType          tools.Kind
		code             string
		say              string   // the message must contain this
		fields           []string // pointers that must be listed
	}{
		{"malformed json", "echo", `{"message": }`, nil, 400, tools.ValidationError, "invalid_json", "invalid JSON", nil},
		{"truncated json", "echo", `{"message": "x"`, nil, 400, tools.ValidationError, "invalid_json", "truncated", nil},
		{"two values", "echo", `{"message":"a"}{"message":"b"}`, nil, 400, tools.ValidationError, "invalid_json", "more than one JSON value", nil},
		{"duplicate keys", "echo", `{"message":"a","message":"b"}`, nil, 400, tools.ValidationError, "invalid_json", "duplicate", nil},
		{"invalid utf8", "echo", "{\"message\":\"\xc3\x28\"}", nil, 400, tools.ValidationError, "invalid_json", "UTF-8", nil},
		{"deep nesting", "echo", `{"message":"x","data":` + strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000) + "}", nil,
			400, tools.ValidationError, "invalid_json", "nesting deeper than 64", nil},
		{"array body", "echo", `["message"]`, nil, 400, tools.ValidationError, "", "must be object", []string{""}},
		{"missing parameter", "echo", `{}`, nil, 400, tools.ValidationError, "", "/message is required", []string{"/message"}},
		{"wrong type", "echo", `{"message":42}`, nil, 400, tools.ValidationError, "", "must be string", []string{"/message"}},
		{"unknown parameter", "echo", `{"message":"x","mesage":"y"}`, nil, 400, tools.ValidationError, "", `not a known parameter (did you mean "message"?)`, []string{"/mesage"}},
		{"every failure listed", "sleep", `{"ms":-1,"extra":1}`, nil, 400, tools.ValidationError, "", "2 argument problem", []string{"/extra", "/ms"}},
		{"control character", "echo", `{"message":"a\u001bb"}`, nil, 400, tools.ValidationError, "control_character", "control character", []string{"/message"}},
		{"NUL byte", "echo", `{"message":"a\u0000b"}`, nil, 403, tools.SecurityError, "nul_byte", "NUL byte", []string{"/message"}},
		{"wrong content type", "echo", `{"message":"x"}`, map[string]string{"Content-Type": "text/plain"}, 415, tools.ValidationError, "unsupported_media_type", "Content-Type", nil},
		{"wrong charset", "echo", `{"message":"x"}`, map[string]string{"Content-Type": "application/json; charset=latin1"}, 415, tools.ValidationError, "unsupported_media_type", "", nil},
		{"huge body", "echo", `{"message":"` + strings.Repeat("a", 70<<10) + `"}`, nil, 413, tools.ValidationError, "body_too_large", "limit", nil},
		{"unknown tool", "ecko", `{}`, nil, 404, tools.NotFound, "", `no tool named "ecko"`, nil},
		{"bad timeout header", "echo", `{"message":"x"}`, map[string]string{"Toold-Timeout": "soon"}, 400, tools.ValidationError, "invalid_header", "Toold-Timeout", nil},
		{"negative timeout", "echo", `{"message":"x"}`, map[string]string{"Toold-Timeout": "-1s"}, 400, tools.ValidationError, "invalid_header", "", nil},
		{"overflowing timeout", "echo", `{"message":"x"}`, map[string]string{"Toold-Timeout": "9223372036854775807"}, 400, tools.ValidationError, "invalid_header", "Toold-Timeout", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.exec(tt.tool, tt.body, tt.header)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			e := r.env.Error
			if r.env.Success || e == nil || e.Type != tt.errType || (tt.code != "" && string(e.Code) != tt.code) {
				t.Fatalf("error = %+v, want type %s code %q", e, tt.errType, tt.code)
			}
			if !strings.Contains(e.Message, tt.say) {
				t.Errorf("message %q does not say %q", e.Message, tt.say)
			}
			if e.Suggestion == "" {
				t.Errorf("no suggestion for %q", e.Message)
			}
			for _, p := range tt.fields {
				if !hasField(e.Fields, p) {
					t.Errorf("field %q not listed in %+v", p, e.Fields)
				}
			}
			if tt.errType == tools.ValidationError && tt.fields != nil && len(e.Example) == 0 {
				t.Errorf("validation error without an example call")
			}
		})
	}
	if r := h.exec("echo", `{"message":"still here"}`, nil); r.status != 200 {
		t.Fatalf("server stopped serving after bad input: %d", r.status)
	}
}

func hasField(fields []tools.FieldError, ptr string) bool {
	for _, f := range fields {
		if f.Pointer == ptr {
			return true
		}
	}
	return false
}

func TestUnknownToolSuggestsNearest(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.exec("ecko", `{}`, nil)
	if !strings.Contains(r.env.Error.Suggestion, `"echo"`) {
		t.Errorf("suggestion %q does not name echo", r.env.Error.Suggestion)
	}
}

func TestEmptyBodyMeansNoArguments(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	req, _ := http.NewRequest("POST", h.url+"/tools/panics/execute", nil)
	resp, err := h.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 { // it reached the tool (which panics)
		t.Errorf("status %d, want 500 from the tool", resp.StatusCode)
	}
}

func TestToolFailures(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	tests := []struct {
		name, tool, body string
		status           int
		outcome          dispatch.Status
		errType          tools.Kind
		mustNotSay       string
	}{
		{"user error is information", "fail", `{"kind":"user"}`, 200, dispatch.StatusError, tools.UserError, ""},
		{"security error", "fail", `{"kind":"security"}`, 403, dispatch.StatusError, tools.SecurityError, ""},
		{"untyped error hides detail", "fail", `{"kind":"untyped"}`, 500, dispatch.StatusError, tools.SystemError, "hunter2"},
		{"panic recovered", "panics", `{}`, 500, dispatch.StatusError, tools.SystemError, "secret internal detail"},
		{"output schema enforced", "bad_output", `{}`, 500, dispatch.StatusInvalidOutput, tools.SystemError, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.exec(tt.tool, tt.body, nil)
			if r.status != tt.status || r.env.Status != tt.outcome || r.env.Error == nil || r.env.Error.Type != tt.errType {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			if tt.mustNotSay != "" && bytes.Contains(r.body, []byte(tt.mustNotSay)) {
				t.Errorf("internal detail %q leaked to the client: %s", tt.mustNotSay, r.body)
			}
		})
	}
	if got := h.logs.FilterMessage("tool panicked").Len(); got != 1 {
		t.Errorf("panic logged %d times, want 1", got)
	}
	if r := h.exec("bad_output", `{}`, nil); !hasField(r.env.Error.Fields, "/n") {
		t.Errorf("invalid_output does not point at /n: %+v", r.env.Error.Fields)
	}
}

func TestTimeout(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.exec("sleep", `{"ms":5000}`, map[string]string{"Toold-Timeout": "50ms"})
	if r.status != 504 || r.env.Status != dispatch.StatusTimeout || r.env.Error.Type != tools.TimeoutError || !r.env.Error.Retryable {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	if r.env.DurationMS > 2000 {
		t.Errorf("timeout answered after %.0f ms", r.env.DurationMS)
	}
	// A longer header cannot lengthen the tool's own timeout (stubborn: 100ms).
	r = h.exec("stubborn", `{"ms":300}`, map[string]string{"Toold-Timeout": "10s"})
	if r.status != 504 {
		t.Fatalf("Toold-Timeout lengthened the timeout: %d %s", r.status, r.body)
	}
}

func TestAuth(t *testing.T) {
	const good, narrow = "toold_key_for_tests_0123456789", "toold_narrow_key_0123456789"
	h := newHarness(t, harnessOpts{keys: []auth.Key{
		{Name: "full", SHA256: auth.Hash(good), Tools: []string{"*"}},
		{Name: "echo-only", SHA256: auth.Hash(narrow), Tools: []string{"ech?"}},
	}})
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	tests := []struct {
		name     string
		method   string
		path     string
		header   map[string]string
		status   int
		code     string
		contains string
	}{
		{"no key", "POST", "/tools/echo/execute", nil, 401, "unauthenticated", ""},
		{"wrong scheme", "POST", "/tools/echo/execute", map[string]string{"Authorization": "Basic " + good}, 401, "unauthenticated", ""},
		{"bad key", "POST", "/tools/echo/execute", bearer("nope"), 401, "unauthenticated", ""},
		{"good key", "POST", "/tools/echo/execute", bearer(good), 200, "", ""},
		{"narrow key, allowed tool", "POST", "/tools/echo/execute", bearer(narrow), 200, "", ""},
		{"narrow key, other tool", "POST", "/tools/sleep/execute", bearer(narrow), 403, "forbidden", ""},
		{"narrow key cannot see other schemas", "GET", "/tools/sleep/schema", bearer(narrow), 404, "", ""},
		{"narrow key lists only its tools", "GET", "/tools", bearer(narrow), 200, "", `"name":"echo"`},
		{"listing needs a key", "GET", "/tools", nil, 401, "unauthenticated", ""},
		{"health needs none", "GET", "/healthz", nil, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.method == "POST" {
				body = []byte(`{"message":"x","ms":1}`)
				if strings.Contains(tt.path, "echo") {
					body = []byte(`{"message":"x"}`)
				} else {
					body = []byte(`{"ms":1}`)
				}
			}
			r := h.do(tt.method, tt.path, body, tt.header)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.code != "" && (r.env.Error == nil || string(r.env.Error.Code) != tt.code) {
				t.Errorf("error = %+v, want code %s", r.env.Error, tt.code)
			}
			if got := r.header.Get("WWW-Authenticate"); (tt.status == 401) != (got != "") {
				t.Errorf("WWW-Authenticate = %q on a %d", got, tt.status)
			}
			if tt.contains != "" && !bytes.Contains(compactJSON(r.body), []byte(tt.contains)) {
				t.Errorf("body lacks %s: %s", tt.contains, r.body)
			}
		})
	}
	r := h.do("GET", "/tools", nil, bearer(narrow))
	if bytes.Contains(r.body, []byte(`"sleep"`)) {
		t.Errorf("narrow key sees a tool it may not use")
	}
	for _, e := range h.logs.All() {
		for _, f := range e.Context {
			if strings.Contains(f.String, good) || strings.Contains(f.String, narrow) {
				t.Fatalf("an API key reached the log: %v", e)
			}
		}
	}
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

func TestOriginAndHost(t *testing.T) {
	h := newHarness(t, harnessOpts{origins: []string{"http://localhost:3000"}})
	r := h.do("GET", "/tools", nil, map[string]string{"Origin": "https://evil.example"})
	if r.status != 403 || r.env.Error.Code != "origin_not_allowed" {
		t.Fatalf("foreign origin: %d %s", r.status, r.body)
	}
	r = h.do("GET", "/tools", nil, map[string]string{"Origin": "http://localhost:3000"})
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Fatalf("allowed origin: %d %v", r.status, r.header)
	}
	for _, path := range []string{"/tools/echo/execute", "/executions/x", "/batch", "/approvals", "/approvals/x", "/events", "/audit"} {
		r = h.do("OPTIONS", path, nil, map[string]string{"Origin": "http://localhost:3000"})
		if r.status != 204 || !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Fatalf("preflight of %s: %d %v", path, r.status, r.header)
		}
	}
	// DNS rebinding: a page whose name now resolves to 127.0.0.1 sends its
	// own name as Host (and, same-origin, no Origin header on GET).
	r = h.do("GET", "/tools", nil, map[string]string{"Host": "attacker.example:8080"})
	if r.status != 403 || r.env.Error.Code != "host_not_allowed" {
		t.Fatalf("rebound host: %d %s", r.status, r.body)
	}
}

func TestRoutesAnswerWithEnvelopes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/nope", 404},
		{"DELETE", "/tools/echo/execute", 405},
		{"GET", "/tools/echo/execute", 405},
		{"GET", "/tools/nope", 404},
		{"GET", "/tools/nope/schema", 404},
		{"GET", "/tools?format=xml", 400},
	}
	for _, tt := range tests {
		r := h.do(tt.method, tt.path, nil, nil)
		if r.status != tt.status || r.env.Error == nil || r.env.Success {
			t.Errorf("%s %s: %d %s", tt.method, tt.path, r.status, r.body)
		}
	}
}

func TestHealthAndDrain(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if r := h.do("GET", "/readyz", nil, nil); r.status != 200 {
		t.Fatalf("readyz %d", r.status)
	}
	h.srv.Drain()
	if r := h.do("GET", "/readyz", nil, nil); r.status != 503 {
		t.Errorf("readyz while draining: %d", r.status)
	}
	if r := h.do("GET", "/healthz", nil, nil); r.status != 200 {
		t.Errorf("healthz while draining: %d", r.status)
	}
	r := h.exec("echo", `{"message":"x"}`, nil)
	if r.status != 503 || r.env.Error.Code != "draining" || r.header.Get("Retry-After") == "" {
		t.Errorf("execute while draining: %d %v %s", r.status, r.header, r.body)
	}
}

// TestStuckCallsAtReadyz: a call that ignores its deadline is listed by
// /readyz (the replica stays ready) until it returns.
func TestStuckCallsAtReadyz(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if r := h.exec("stubborn", `{"ms":1500}`, nil); r.status != 504 {
		t.Fatalf("stubborn call: %d %s", r.status, r.body)
	}
	var seen bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r := h.do("GET", "/readyz", nil, nil)
		if r.status != 200 {
			t.Fatalf("readyz with a stuck call: %d %s", r.status, r.body)
		}
		var body struct{ Stuck map[string]int }
		json.Unmarshal(r.body, &body)
		if body.Stuck["stubborn"] == 1 {
			seen = true
		} else if seen {
			return // listed, then gone when the call returned
		}
	}
	t.Fatalf("readyz never listed the stuck call and then dropped it (seen: %v)", seen)
}

func TestOpenAPIServed(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	r := h.do("GET", "/openapi.yaml", nil, nil)
	if r.status != 200 || !bytes.HasPrefix(r.body, []byte("openapi: 3.1")) {
		t.Fatalf("openapi: %d %.40s", r.status, r.body)
	}
}

// TestAccessLog checks one line per request with the fields operators need,
// and that arguments and outputs never reach the log.
func TestAccessLog(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const canary = "canary-argument-7f3a"
	h.exec("echo", `{"message":"`+canary+`"}`, map[string]string{"X-Request-ID": "log-test"})
	lines := h.logs.FilterMessage("request").FilterField(zapString("request_id", "log-test")).All()
	if len(lines) != 1 {
		t.Fatalf("%d access log lines for one request", len(lines))
	}
	fields := lines[0].ContextMap()
	want := map[string]any{"route": "/tools/{name}/execute", "status": int64(200), "tool": "echo", "outcome": "success", "method": "POST"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("log field %s = %v, want %v", k, fields[k], v)
		}
	}
	if _, ok := fields["duration_ms"]; !ok {
		t.Errorf("no duration in %v", fields)
	}
	for _, e := range h.logs.All() {
		if strings.Contains(e.Message, canary) {
			t.Fatal("an argument reached the log")
		}
		for _, f := range e.Context {
			if strings.Contains(f.String, canary) {
				t.Fatal("an argument reached the log")
			}
		}
	}
}

// TestIndex: GET / sends a browser to the console and answers an API
// client with the index: every operation of the contract (and so every
// route the router serves, which the contract tests hold it to), how to
// authenticate, and the docs.
func TestIndex(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	noFollow := &http.Client{Transport: apitest.Checker(t, http.DefaultTransport), Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, accept := range []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"} {
		req, _ := http.NewRequest("GET", h.url+"/", nil)
		req.Header.Set("Accept", accept)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
			t.Errorf("a browser (Accept %s): %d, Location %q", accept, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, accept := range []string{"", "application/json", "*/*", "application/json, text/html"} {
		r := h.do("GET", "/", nil, map[string]string{"Accept": accept})
		var idx Index
		if r.status != 200 || json.Unmarshal(r.body, &idx) != nil {
			t.Fatalf("an API client (Accept %q): %d %s", accept, r.status, r.body)
		}
		if idx.Console != "/console/" || idx.OpenAPI != "/openapi.yaml" || !idx.Auth.None || idx.Auth.Keys ||
			!strings.HasSuffix(idx.Docs["api"], "/main/docs/api.md") {
			t.Errorf("index: %+v", idx)
		}
		served := map[string]bool{}
		for _, rt := range idx.Routes {
			served[rt.Method+" "+rt.Path] = rt.Summary != ""
		}
		for _, want := range []string{"GET /tools", "POST /tools/{name}/execute", "GET /approvals", "GET /", "POST /executions/{id}/resume"} {
			if !served[want] {
				t.Errorf("the index lacks %s (or its summary): %v", want, idx.Routes)
			}
		}
	}
	// Every GET, POST and DELETE route of the router is in the index.
	idx := map[string]bool{}
	for _, rt := range contractRoutes(api.OpenAPI) {
		idx[rt.Method+" "+rt.Path] = true
	}
	_ = chi.Walk(h.srv.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method == "OPTIONS" || strings.HasSuffix(route, "/*") || route == "/console" {
			return nil
		}
		if !idx[method+" "+route] {
			t.Errorf("the router serves %s %s, which the index (the contract) does not list", method, route)
		}
		return nil
	})
	keyed := newHarness(t, harnessOpts{keys: []auth.Key{{Name: "a", SHA256: auth.Hash("toold_index_key_for_tests_0001"), Tools: []string{"*"}}}})
	var k Index
	if r := keyed.do("GET", "/", nil, nil); json.Unmarshal(r.body, &k) != nil || !k.Auth.Keys || k.Auth.None {
		t.Errorf("with keys, the index says %+v", k.Auth)
	}
}

// TestConsoleModeAndRecentActivity: GET /auth/session tells the console
// of a toold without keys that no key is needed and, with
// approvals.self_approval off, in one line why no one can approve and what
// to set; a toold with keys says neither. GET /events?since= is a bounded
// duration, refused with the parameter named otherwise.
func TestConsoleModeAndRecentActivity(t *testing.T) {
	open := newHarness(t, harnessOpts{store: true})
	r := open.do("GET", "/auth/session", nil, nil)
	var v struct {
		NoCredentials bool   `json:"no_credentials"`
		ApprovalsOff  string `json:"approvals_off"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &v) != nil || !v.NoCredentials ||
		!strings.Contains(v.ApprovalsOff, "approvals.self_approval: true") || !strings.Contains(v.ApprovalsOff, "auth.keys") {
		t.Errorf("without keys: %d %s", r.status, r.body)
	}
	for _, since := range []string{"bogus", "-1m", "0s", "48h"} {
		r := open.do("GET", "/events?since="+since, nil, nil)
		if r.status != 400 || !strings.Contains(string(r.body), `"invalid_parameter"`) || !strings.Contains(string(r.body), "since") {
			t.Errorf("since=%s: %d %s", since, r.status, r.body)
		}
	}
	keyed := newHarness(t, harnessOpts{keys: []auth.Key{{Name: "k", SHA256: auth.Hash("toold_some_key_for_the_mode_test"), Tools: []string{"*"}}}})
	r = keyed.do("GET", "/auth/session", nil, nil)
	if r.status != 200 || strings.Contains(string(r.body), "no_credentials") || strings.Contains(string(r.body), "approvals_off") {
		t.Errorf("with keys: %d %s", r.status, r.body)
	}
}
