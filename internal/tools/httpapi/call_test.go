package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// oneTool declares a tool "t" calling the loopback API; extra lines are
// added to its declaration.
func oneTool(method, extra string) string {
	return `
tools:
  - name: t
    description: Calls the test API.
    parameters: {type: object, properties: {id: {type: string}}}
    request: {method: ` + method + `, url: $API/items}
    allow: [127.0.0.1]
    allow_http: true
` + extra
}

// TestErrorClasses: every kind of answer maps to the envelope a model (or
// the operator) can act on, through the whole pipeline, with the HTTP
// status the server would give it and the number of attempts made.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		extra    string
		status   dispatch.Status
		kind     tools.Kind
		code     string
		retry    bool
		afterMS  int64
		attempts int
		say      string
	}{
		{"success", ok(`{"a":1}`), "", dispatch.StatusSuccess, "", "", false, 0, 1, ""},
		{"text", status(200, "plain words", "Content-Type", "text/plain"), "    response: {format: text}\n",
			dispatch.StatusSuccess, "", "", false, 0, 1, ""},
		{"400 with the API's message", status(400, `{"message":"Validation Failed","errors":[{"resource":"Search","field":"q","code":"missing"}]}`),
			"", dispatch.StatusError, tools.UserError, "upstream_rejected", false, 0, 1, "400 Bad Request: Validation Failed: resource Search, field q, code missing"},
		{"404", status(404, `{"error":{"message":"no such item"}}`), "", dispatch.StatusError, tools.UserError, "upstream_rejected", false, 0, 1, "no such item"},
		{"422 text", status(422, "bad   date\nformat", "Content-Type", "text/plain"), "", dispatch.StatusError, tools.UserError, "upstream_rejected", false, 0, 1, "422 Unprocessable Entity: bad date format"},
		{"401", status(401, `{"message":"Bad credentials"}`), "", dispatch.StatusError, tools.PermissionError, "upstream_auth", false, 0, 1, "refused toold's credentials"},
		{"403", status(403, `{"message":"Forbidden"}`), "", dispatch.StatusError, tools.PermissionError, "upstream_auth", false, 0, 1, "403 Forbidden"},
		{"403 that is a rate limit", status(403, `{}`, "Retry-After", "7"), "    retry: {attempts: 1}\n",
			dispatch.StatusError, tools.OverloadError, "upstream_rate_limited", true, 7000, 1, "asks to wait 7s"},
		{"429", status(429, `{}`, "Retry-After", "3"), "    retry: {attempts: 1}\n",
			dispatch.StatusError, tools.OverloadError, "upstream_rate_limited", true, 3000, 1, "429 Too Many Requests"},
		{"429 for a year", status(429, `{}`, "Retry-After", "31536000"), "",
			dispatch.StatusError, tools.OverloadError, "upstream_rate_limited", true, 3600000, 1, "asks to wait 8760h0m0s"},
		{"500", status(500, `{"message":"boom"}`), "", dispatch.StatusError, tools.SystemError, "upstream_error", true, 0, 1, "500 Internal Server Error: boom"},
		{"503 after retries", status(503, "<html>down</html>", "Content-Type", "text/html"), "",
			dispatch.StatusError, tools.SystemError, "upstream_error", true, 0, 3, "503 Service Unavailable"},
		{"invalid JSON", ok(`{"a":1,`), "", dispatch.StatusInvalidOutput, tools.SystemError, "invalid_output", false, 0, 1, "not JSON"},
		{"HTML declared JSON", status(200, "<html>hi</html>", "Content-Type", "text/html"), "",
			dispatch.StatusInvalidOutput, tools.SystemError, "invalid_output", false, 0, 1, `text/html that is not JSON`},
		{"jq does not fit", ok(`{"items":3}`), "    response: {jq: '.items[]'}\n",
			dispatch.StatusInvalidOutput, tools.SystemError, "invalid_output", false, 0, 1, "does not fit the tool's jq"},
		{"output schema", ok(`{"a":"x"}`), "    response: {output: {type: object, properties: {a: {type: integer}}}}\n",
			dispatch.StatusInvalidOutput, tools.SystemError, "invalid_output", false, 0, 1, "output schema"},
		{"oversized", ok(`{"a":"` + strings.Repeat("x", 2000) + `"}`), "    response: {max_bytes: 1024}\n",
			dispatch.StatusError, tools.UserError, "response_too_large", false, 0, 1, "1024-byte cap"},
		{"unused 3xx", status(304, ""), "", dispatch.StatusError, tools.SystemError, "upstream_error", false, 0, 1, "304 Not Modified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, tt.handler)
			s, _, _ := build(t, u, oneTool("GET", tt.extra))
			env := execute(pipeline(t, s), "t", `{}`)
			if env.Status != tt.status || env.Timing.Attempts != tt.attempts || u.hits.Load() != int64(tt.attempts) {
				t.Fatalf("status %s after %d attempts (%d received), want %s after %d: %s %+v",
					env.Status, env.Timing.Attempts, u.hits.Load(), tt.status, tt.attempts, env.Data, env.Error)
			}
			if tt.kind == "" {
				return
			}
			e := env.Error
			if e.Type != tt.kind || string(e.Code) != tt.code || e.Retryable != tt.retry || e.RetryAfterMS != tt.afterMS ||
				!strings.Contains(e.Message, tt.say) || (e.Suggestion == "" && tt.name != "output schema") {
				t.Fatalf("error %+v", e)
			}
		})
	}
}

// TestConnectionFailures: an API that is not there is retried (nothing was
// sent, so even a POST), then answered as a retryable system error.
func TestConnectionFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, method := range []string{"GET", "POST"} {
		s, c, _ := build(t, nil, strings.ReplaceAll(oneTool(method, ""), "$API", "http://"+addr))
		_, err, call := call(t, s, "t", `{}`, 5*time.Second)
		te := errorOf(t, err)
		if te.Kind != tools.SystemError || te.Code != "upstream_unreachable" || !te.Retryable || call.Attempts() != 3 || len(c.slept()) != 2 {
			t.Errorf("%s: %v retryable=%v after %d attempts, %d waits", method, te, te.Retryable, call.Attempts(), len(c.slept()))
		}
	}
}

// TestFlappingAPI: an API that fails twice, then answers, is retried with
// growing backoffs (full jitter: half the bound with the test's dice), and
// the call succeeds; attempts and waits reach the envelope and the metrics.
func TestFlappingAPI(t *testing.T) {
	u := newUpstream(t, sequence(status(503, ""), status(502, ""), ok(`{"ok":true}`)))
	s, c, reg := build(t, u, oneTool("GET", "    retry: {attempts: 4, base: 40ms, max: 1s}\n"))
	env := execute(pipeline(t, s), "t", `{}`)
	if !env.Success || env.Timing.Attempts != 3 || env.Timing.WaitMS != 60 {
		t.Fatalf("%s after %d attempts, waited %vms: %+v", env.Status, env.Timing.Attempts, env.Timing.WaitMS, env.Error)
	}
	if got := fmt.Sprint(c.slept()); got != "[20ms 40ms]" {
		t.Errorf("waits %s, want [20ms 40ms]", got)
	}
	body := scrape(t, reg)
	for _, want := range []string{`toold_upstream_attempts_total{host="` + hostOf(u) + `",outcome="5xx",tool="t"} 2`,
		`toold_upstream_attempts_total{host="` + hostOf(u) + `",outcome="2xx",tool="t"} 1`,
		`toold_upstream_waits_total{reason="backoff",tool="t"} 2`, `toold_upstream_wait_seconds_total{reason="backoff",tool="t"} 0.06`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestOnlyIdempotentRetried: a POST that reached the API is not sent
// twice, unless the tool declares it idempotent.
func TestOnlyIdempotentRetried(t *testing.T) {
	for _, tt := range []struct {
		extra string
		hits  int64
	}{{"", 1}, {"    idempotent: true\n", 2}} {
		u := newUpstream(t, sequence(status(503, ""), ok(`{}`)))
		s, _, _ := build(t, u, oneTool("POST", tt.extra))
		call(t, s, "t", `{}`, 5*time.Second)
		if u.hits.Load() != tt.hits {
			t.Errorf("%q: the API received %d, want %d", tt.extra, u.hits.Load(), tt.hits)
		}
	}
}

// TestRetryAfter: a Retry-After that fits the deadline is waited out (the
// wait shows in the timing); one that does not is answered at once with
// the hint, and the host is left alone until then: the next call is
// refused without sending.
func TestRetryAfter(t *testing.T) {
	u := newUpstream(t, sequence(status(429, `{}`, "Retry-After", "2"), ok(`{"n":1}`)))
	s, c, _ := build(t, u, oneTool("GET", ""))
	env := execute(pipeline(t, s), "t", `{}`)
	if !env.Success || env.Timing.Attempts != 2 || env.Timing.WaitMS != 2000 || fmt.Sprint(c.slept()) != "[2s]" {
		t.Fatalf("%s attempts %d waited %v (%v)", env.Status, env.Timing.Attempts, env.Timing.WaitMS, c.slept())
	}

	u = newUpstream(t, status(429, `{}`, "Retry-After", "60"))
	s, _, reg := build(t, u, oneTool("GET", ""))
	d := pipeline(t, s)
	env = execute(d, "t", `{}`)
	if env.Error == nil || env.Error.Code != "upstream_rate_limited" || env.Error.RetryAfterMS != 60000 || u.hits.Load() != 1 {
		t.Fatalf("a minute's Retry-After: %+v after %d requests", env.Error, u.hits.Load())
	}
	env = execute(d, "t", `{}`)
	if env.Error == nil || env.Error.Code != "upstream_rate_limited" || env.Error.RetryAfterMS > 60000 ||
		env.Error.RetryAfterMS < 59000 || u.hits.Load() != 1 || env.Timing.Attempts != 0 {
		t.Fatalf("the next call: %+v after %d requests", env.Error, u.hits.Load())
	}
	if !strings.Contains(scrape(t, reg), `toold_upstream_refusals_total{reason="upstream_rate_limited",tool="t"} 1`) {
		t.Error("the refusal is not counted")
	}
	for _, h := range []string{"", "soon", "-5", "1.5"} { // unreadable: the backoff decides
		if d, ok := parseRetryAfter(h, time.Now()); ok {
			t.Errorf("Retry-After %q read as %v", h, d)
		}
	}
	now := time.Now()
	if d, ok := parseRetryAfter(now.Add(90*time.Second).UTC().Format(http.TimeFormat), now); !ok || d < 89*time.Second || d > 90*time.Second {
		t.Errorf("an HTTP date read as %v", d)
	}
}

// TestSlowAPIAndTheDeadline: an API slower than the tool's timeout is
// answered with a timeout at the deadline, not when it finally answers;
// an attempt timeout shorter than the deadline leaves room to retry.
func TestSlowAPIAndTheDeadline(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	u := newUpstream(t, hang)
	s, _, _ := build(t, u, oneTool("GET", "    limits: {timeout: 300ms, max: 200ms, target: 100ms}\n"))
	start := time.Now()
	env := execute(pipeline(t, s), "t", `{}`)
	if env.Status != dispatch.StatusTimeout || time.Since(start) > 2*time.Second {
		t.Fatalf("%s after %v", env.Status, time.Since(start))
	}

	u = newUpstream(t, sequence(hang, ok(`{"second":true}`)))
	s, _, _ = build(t, u, oneTool("GET", "    retry: {attempt_timeout: 100ms}\n    limits: {timeout: 5s}\n"))
	env = execute(pipeline(t, s), "t", `{}`)
	if !env.Success || env.Timing.Attempts != 2 {
		t.Fatalf("%s after %d attempts: %+v", env.Status, env.Timing.Attempts, env.Error)
	}
}

// TestDeadAPIBreaker: an API that keeps failing opens its host's breaker
// after the configured failures; calls are then refused at once with a
// retry hint and nothing is sent; discovery and metrics say open; after
// open_for one probe goes through — failing, it opens again; succeeding,
// it closes.
func TestDeadAPIBreaker(t *testing.T) {
	u := newUpstream(t, status(500, `{"message":"dead"}`))
	s, _, reg := build(t, u, oneTool("GET", "    retry: {attempts: 1}\n")+"breaker: {failures: 3, open_for: 150ms}\n")
	d := pipeline(t, s)
	tl := s.Tools()[0].(*tool)
	for i := range 3 {
		if env := execute(d, "t", `{}`); env.Error == nil || env.Error.Code != "upstream_error" {
			t.Fatalf("call %d: %+v", i, env.Error)
		}
	}
	if st := tl.Upstream(); st.Breaker != "open" || st.RetryAfter <= 0 || st.RetryAfter > 150*time.Millisecond {
		t.Fatalf("after 3 failures: %+v", st)
	}
	start := time.Now()
	env := execute(d, "t", `{}`)
	if env.Error == nil || env.Error.Code != "circuit_open" || env.Error.Type != tools.OverloadError ||
		env.Error.RetryAfterMS < 1 || env.Error.RetryAfterMS > 150 || u.hits.Load() != 3 || env.Timing.Attempts != 0 {
		t.Fatalf("open breaker: %+v after %d requests", env.Error, u.hits.Load())
	}
	// How fast is BenchmarkOpenBreaker's to say; here only that the refusal
	// did not wait on anything (the hit count says it made no request).
	if took := time.Since(start); took > time.Second {
		t.Errorf("the open breaker took %v to refuse", took)
	}
	if m := scrape(t, reg); !strings.Contains(m, `toold_upstream_circuit_state{host="`+hostOf(u)+`",state="open"} 1`) {
		t.Errorf("metrics do not say open:\n%s", m)
	}
	halfOpen(t, tl)
	if env := execute(d, "t", `{}`); env.Error == nil || env.Error.Code != "upstream_error" || u.hits.Load() != 4 {
		t.Fatalf("the probe: %+v after %d requests", env.Error, u.hits.Load())
	}
	if st := tl.Upstream().Breaker; st != "open" {
		t.Fatalf("a failed probe left it %s", st)
	}
	halfOpen(t, tl)
	u.set(ok(`{"back":true}`))
	if env := execute(d, "t", `{}`); !env.Success {
		t.Fatalf("the API is back: %+v", env.Error)
	}
	if st := tl.Upstream().Breaker; st != "closed" {
		t.Fatalf("a good probe left it %s", st)
	}
	if m := scrape(t, reg); !strings.Contains(m, `toold_upstream_circuit_state{host="`+hostOf(u)+`",state="closed"} 1`) {
		t.Errorf("metrics do not say closed")
	}
}

// halfOpen waits until the tool's host's breaker lets a probe through,
// as it says (open_for after it opened; 5 s at most). The breaker is a
// library's, on the wall clock, over a real connection: synctest's clock
// cannot stand in for it.
func halfOpen(t *testing.T, tl *tool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for st := tl.Upstream().Breaker; st != "half_open"; st = tl.Upstream().Breaker {
		if st != "open" || time.Now().After(deadline) {
			t.Fatalf("after open_for: %s", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRateLimits: the tool's bucket and its host's, shared with another
// tool, make a call wait for a token when that fits its deadline and
// refuse it with a retry hint when it does not.
func TestRateLimits(t *testing.T) {
	u := newUpstream(t, ok(`{}`))
	src := `
hosts:
  HOST: {rate: {per_second: 0.5, burst: 1}}
tools:
  - {name: a, description: A., request: {url: $API/a}, allow: [127.0.0.1], allow_http: true}
  - {name: b, description: B., request: {url: $API/b}, allow: [127.0.0.1], allow_http: true, limits: {timeout: 1s, max: 1s, target: 1s}}
  - {name: c, description: C., request: {url: $API/c}, allow: [127.0.0.1], allow_http: true, rate: {per_second: 0.1}}
`
	s, c, reg := build(t, u, strings.ReplaceAll(src, "HOST", hostOf(u)))
	d := pipeline(t, s)
	if env := execute(d, "a", `{}`); !env.Success || len(c.slept()) != 0 {
		t.Fatalf("first call: %s, waits %v", env.Status, c.slept())
	}
	env := execute(d, "b", `{}`) // the host's token is gone for 2s; b has 1s
	if env.Error == nil || env.Error.Code != "rate_limited" || env.Error.RetryAfterMS < 1000 || env.Error.RetryAfterMS > 2000 || u.hits.Load() != 1 {
		t.Fatalf("b: %+v, %d requests", env.Error, u.hits.Load())
	}
	env = execute(d, "a", `{}`) // a has 10s: it waits for the token
	if !env.Success || len(c.slept()) != 1 || c.slept()[0] < time.Second || env.Timing.WaitMS < 1000 {
		t.Fatalf("a again: %s, waits %v, timing %+v", env.Status, c.slept(), env.Timing)
	}
	if !strings.Contains(scrape(t, reg), `toold_upstream_refusals_total{reason="rate_limited",tool="b"} 1`) {
		t.Error("the refusal is not counted")
	}
	s, c, _ = build(t, u, `
tools:
  - {name: c, description: C., request: {url: $API/c}, allow: [127.0.0.1], allow_http: true, rate: {per_second: 0.1}}
`)
	d = pipeline(t, s)
	execute(d, "c", `{}`)
	if env := execute(d, "c", `{}`); !env.Success || len(c.slept()) != 1 || c.slept()[0] < 9*time.Second {
		t.Fatalf("the tool's own rate: %s, waits %v", env.Status, c.slept())
	}
}

// TestRedirects: a redirect on the API's own host is followed; one to
// another host is refused, and the credential never reaches it.
func TestRedirects(t *testing.T) {
	other := newUpstream(t, ok(`{"stolen":true}`))
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/items":
			http.Redirect(w, r, "/moved", http.StatusFound)
		case "/moved":
			w.Write([]byte(`{"moved":true}`))
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		}
	})
	s, _, _ := build(t, u, oneTool("GET", "    auth: {header: {name: X-Key, value: key-123456}}\n"))
	if v, err, c := call(t, s, "t", `{}`, 5*time.Second); err != nil || mustJSON(v) != `{"moved":true}` || c.Attempts() != 1 {
		t.Fatalf("same-host redirect: %v %v", v, err)
	}
	s, _, _ = build(t, u, strings.Replace(oneTool("GET", "    auth: {header: {name: X-Key, value: key-123456}}\n"), "/items", "/away", 1))
	_, err, _ := call(t, s, "t", `{}`, 5*time.Second)
	if te := errorOf(t, err); te.Kind != tools.SecurityError || te.Code != "redirect_refused" || other.hits.Load() != 0 {
		t.Fatalf("cross-host redirect: %v, the other host got %d", te, other.hits.Load())
	}
}

// TestFallbackChainOverHTTP: a dead API's tool falls back to a second
// tool whose API is flapping, and then to a third that answers; the
// envelope names the answer's tool and why the others did not.
func TestFallbackChainOverHTTP(t *testing.T) {
	dead := newUpstream(t, status(500, `{"message":"dead"}`))
	flaky := newUpstream(t, status(503, ""))
	good := newUpstream(t, ok(`{"temp":21}`))
	src := `
tools:
  - {name: primary, description: P., parameters: {type: object, properties: {city: {type: string}}, required: [city]},
     request: {url: "DEAD/w", query: {q: "{city}"}}, allow: [127.0.0.1], allow_http: true, fallback: [secondary]}
  - {name: secondary, description: S., parameters: {type: object, properties: {city: {type: string}}, required: [city]},
     request: {url: "FLAKY/w/{city}"}, allow: [127.0.0.1], allow_http: true, fallback: [cache], retry: {attempts: 2}}
  - {name: cache, description: C., parameters: {type: object, properties: {city: {type: string}}},
     request: {url: "GOOD/c", query: {city: "{city}"}}, allow: [127.0.0.1], allow_http: true}
`
	src = strings.NewReplacer("DEAD", dead.URL, "FLAKY", flaky.URL, "GOOD", good.URL).Replace(src)
	s, _, _ := build(t, nil, src)
	env := execute(pipeline(t, s), "primary", `{"city":"Oslo"}`)
	if !env.Success || env.Tool != "cache" || string(env.Data) != `{"temp":21}` {
		t.Fatalf("%s from %s: %s %+v", env.Status, env.Tool, env.Data, env.Error)
	}
	if len(env.FallbackFrom) != 2 || env.FallbackFrom[0].Tool != "primary" || env.FallbackFrom[0].Error.Code != "upstream_error" ||
		env.FallbackFrom[1].Tool != "secondary" || env.FallbackFrom[1].Error.Code != "upstream_error" {
		t.Fatalf("fallback_from %s", mustJSON(env.FallbackFrom))
	}
	if dead.hits.Load() != 1 || flaky.hits.Load() != 2 || good.last(t).Query != "city=Oslo" || flaky.last(t).Path != "/w/Oslo" {
		t.Errorf("requests: dead %d, flaky %d, good %s", dead.hits.Load(), flaky.hits.Load(), good.last(t).Query)
	}
}

func hostOf(u *upstream) string { return strings.TrimPrefix(u.URL, "http://") }

func TestMetricNamesPassLint(t *testing.T) {
	u := newUpstream(t, sequence(status(503, ""), ok(`{}`)))
	s, _, reg := build(t, u, oneTool("GET", "    rate: {per_second: 1000}\n"))
	execute(pipeline(t, s), "t", `{}`)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}
