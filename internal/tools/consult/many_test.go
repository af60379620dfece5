package consult

import (
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
)

// TestManyPartialFailure: providers run in parallel; a slow one (past its
// timeout), a missing one and a broken one do not fail the others; the
// synthesis runs on the synthesis provider with the answers that
// succeeded, and nothing else.
func TestManyPartialFailure(t *testing.T) {
	e := newEnv(t)
	slow := e.cli("slow", "sleep")
	slow.Timeout = 800 * time.Millisecond
	missing := e.cli("missing", "json")
	missing.Command = "no-such-ai-cli"
	r := e.build(Config{Providers: map[string]ProviderConfig{
		"gem": e.cli("gem", "json"), "cod": e.text("cod", "text"), "api": e.apiProvider("small"),
		"slow": slow, "missing": missing, "broken": e.cli("broken", "garbage"), "judge": e.text("judge", "echo"),
	}, Synthesis: "judge"})
	start := time.Now()
	m := r.many(`{"prompt":"Is this queue lock-free?","providers":["gem","cod","api","slow","missing","broken"],"failure_type":"exception"}`)
	took := time.Since(start)
	want := map[string]Status{"gem": StatusSuccess, "cod": StatusSuccess, "api": StatusSuccess,
		"slow": StatusTimeout, "missing": StatusNotFound, "broken": StatusInvalidOutput}
	for name, st := range want {
		if got := m.Responses[name]; got.Status != st || got.Tool != name {
			t.Errorf("%s: %s %v, want %s", name, got.Status, deref(got.Error), st)
		}
	}
	if len(m.Responses) != len(want) || m.SuccessCount != 3 || m.FailureCount != 3 {
		t.Errorf("%d responses, %d successes, %d failures", len(m.Responses), m.SuccessCount, m.FailureCount)
	}
	if deref(m.FailureType) != "exception" || m.Timestamp == "" {
		t.Errorf("failure_type %v, timestamp %q", deref(m.FailureType), m.Timestamp)
	}
	// The slowest is the one stopped at 800ms; the others did not wait
	// for each other, and the wall clock covers them all.
	if m.MaxDuration < 0.8 || m.MaxDuration > m.TotalDuration || m.TotalDuration > took.Seconds() || took > 4*time.Second {
		t.Errorf("max %vs, total %vs, took %v", m.MaxDuration, m.TotalDuration, took)
	}
	// The judge echoes its prompt: the question and the three answers,
	// not the failures.
	if m.Synthesis == nil || m.SynthesisSkipped != nil || m.SynthesisResponse == nil || m.SynthesisResponse.Tool != "judge" {
		t.Fatalf("synthesis %v, skipped %v, response %+v", m.Synthesis, deref(m.SynthesisSkipped), m.SynthesisResponse)
	}
	s := *m.Synthesis
	if !has(s, "Merge their answers", "## Question\n\nIs this queue lock-free?", "## Answer from gem\n\ngem answers",
		"## Answer from cod\n\ncod answers", "## Answer from api\n\napi answers") {
		t.Errorf("synthesis prompt:\n%s", s)
	}
	for _, failed := range []string{"slow", "missing", "broken"} {
		if strings.Contains(s, "Answer from "+failed) {
			t.Errorf("the synthesis got %s's failure", failed)
		}
	}
	if m.SynthesisResponse.Metadata["operation"] != "synthesis" {
		t.Errorf("synthesis metadata %v", m.SynthesisResponse.Metadata)
	}
}

// TestSynthesisSkipped: asked not to, fewer than two answers, or the
// synthesis itself failing (its own timeout included): each says why.
func TestSynthesisSkipped(t *testing.T) {
	e := newEnv(t)
	sleeper := e.text("sleeper", "sleep")
	sleeper.Timeout = time.Minute // the synthesis timeout applies to synthesis, not this
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "cod": e.text("cod", "text"),
		"bad": e.cli("bad", "garbage"), "sleeper": sleeper},
		Synthesis: "sleeper", Timeouts: Timeouts{Synthesis: 600 * time.Millisecond}})
	for _, tc := range []struct{ args, skipped string }{
		{`{"prompt":"q","providers":["gem","cod"],"synthesize":false}`, "not asked (synthesize: false)"},
		{`{"prompt":"q","providers":["gem","bad"]}`, "fewer than two providers answered (1 of 2)"},
		{`{"prompt":"q","providers":["gem","cod"]}`, "the synthesis by sleeper ended timeout: no answer within 600ms"},
	} {
		m := r.many(tc.args)
		if m.Synthesis != nil || !strings.Contains(deref(m.SynthesisSkipped), tc.skipped) {
			t.Errorf("%s: synthesis %v, skipped %q", tc.args, deref(m.Synthesis), deref(m.SynthesisSkipped))
		}
	}
	// Without a synthesis provider, the first that answered synthesizes.
	r2 := e.build(Config{Providers: map[string]ProviderConfig{"a": e.text("a", "echo"), "b": e.text("b", "text")}})
	m := r2.many(`{"prompt":"q"}`)
	if m.SynthesisResponse == nil || m.SynthesisResponse.Tool != "a" || !strings.Contains(deref(m.Synthesis), "## Answer from b") {
		t.Errorf("default synthesis: %+v", m.SynthesisResponse)
	}
}

// TestManyAllAvailable: without providers, every available one is asked:
// the missing and broken ones are left out by discovery; when none is
// available the call says so.
func TestManyAllAvailable(t *testing.T) {
	e := newEnv(t)
	missing := e.cli("missing", "json")
	missing.Command = "no-such-ai-cli"
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "cod": e.text("cod", "text"),
		"missing": missing, "broken": e.cli("broken", "version-hang")}, Timeouts: Timeouts{Detection: 300 * time.Millisecond}})
	m := r.many(`{"prompt":"q","synthesize":false}`)
	if len(m.Responses) != 2 || m.Responses["gem"].Status != StatusSuccess || m.Responses["cod"].Status != StatusSuccess {
		t.Errorf("responses %v", m.Responses)
	}
	r2 := e.build(Config{Providers: map[string]ProviderConfig{"missing": missing}})
	env := r2.call("consult_many", `{"prompt":"q"}`, nil)
	if env.Status != dispatch.StatusError || env.Error.Code != "no_provider" || !strings.Contains(env.Error.Message, "missing: not installed") {
		t.Errorf("none available: %s %+v", env.Status, env.Error)
	}
}

// TestManyIsParallel: three providers that each take a second answer in
// about a second together, not three — CLIs and an API alike. The bound
// is generous (the machine is shared): well under the sum.
func TestManyIsParallel(t *testing.T) {
	e := newEnv(t)
	one := func(name string) ProviderConfig {
		p := e.text(name, "sleep")
		p.Sandbox.Env["FAKE_SLEEP"] = "1"
		return p
	}
	api := e.apiProvider("sleep1")
	r := e.build(Config{Providers: map[string]ProviderConfig{"a": one("a"), "b": one("b"), "c": one("c"), "api": api}})
	for _, providers := range []string{`["a","b","c"]`, `["a","b","api"]`} {
		start := time.Now()
		m := r.many(`{"prompt":"q","synthesize":false,"providers":` + providers + `}`)
		took := time.Since(start)
		if m.SuccessCount != 3 {
			t.Fatalf("%s: %d successes: %+v", providers, m.SuccessCount, m.Responses)
		}
		sum := 0.0
		for _, resp := range m.Responses {
			sum += resp.Duration
		}
		t.Logf("%s: wall clock %.3fs, total_duration %.3fs, sum of durations %.3fs", providers, took.Seconds(), m.TotalDuration, sum)
		if sum < 3 || took.Seconds() > 0.7*sum {
			t.Errorf("%s: wall clock %v for a sum of %.2fs: not parallel", providers, took, sum)
		}
	}
}

// TestProviderSlots: a provider's own slots bound its runs over all calls;
// a run that cannot get one within its timeout says so, and the other
// providers of the same call are not held up.
func TestProviderSlots(t *testing.T) {
	e := newEnv(t)
	busy := e.text("busy", "sleep")
	busy.Sandbox.Env["FAKE_SLEEP"] = "1"
	busy.MaxInFlight = 1
	busy.Timeout = 1500 * time.Millisecond
	r := e.build(Config{Providers: map[string]ProviderConfig{"busy": busy, "free": e.text("free", "text")}})
	first := make(chan Response)
	go func() { first <- r.one(`{"prompt":"q","provider":"busy"}`) }()
	time.Sleep(300 * time.Millisecond) // the first call holds busy's one slot
	start := time.Now()
	m := r.many(`{"prompt":"q","providers":["busy","free"],"synthesize":false,"timeout":0.5}`)
	if got := m.Responses["busy"]; got.Status != StatusTimeout || !strings.Contains(deref(got.Error), "no free slot within 500ms") {
		t.Errorf("busy: %s %v", got.Status, deref(got.Error))
	}
	if got := m.Responses["free"]; got.Status != StatusSuccess || got.Duration > 0.4 {
		t.Errorf("free: %s after %vs", got.Status, got.Duration)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the call took %v", took)
	}
	if got := <-first; got.Status != StatusSuccess {
		t.Errorf("the slot's holder: %s %v", got.Status, deref(got.Error))
	}
}
