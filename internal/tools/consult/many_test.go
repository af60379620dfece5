package consult

import (
	"encoding/json"
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

// TestManyIsParallel: the providers of one call run at once — CLIs and an
// API alike. Each waits at a barrier until all of them are running, so
// runs one after another would never get past the first: the proof holds
// on a loaded machine, where comparing durations would not.
func TestManyIsParallel(t *testing.T) {
	for _, parties := range [][]string{{"a", "b", "c"}, {"a", "b", "api"}} {
		e := newEnv(t)
		b := newBarrier(t, e)
		ps := map[string]ProviderConfig{}
		for _, name := range parties {
			if name == "api" {
				ps[name] = e.apiProvider("barrier")
			} else {
				ps[name] = b.cli(e.text(name, "text"), name)
			}
		}
		r := e.build(Config{Providers: ps})
		done := make(chan *dispatch.Envelope, 1)
		go func() { done <- r.call("consult_many", `{"prompt":"q","synthesize":false}`, nil) }()
		b.await(parties...)
		var m MultiResponse
		if env := <-done; env.Status != dispatch.StatusSuccess || json.Unmarshal(env.Data, &m) != nil || m.SuccessCount != 3 {
			t.Errorf("%v: %s %s", parties, env.Status, env.Data)
		}
	}
}

// TestProviderSlots: a provider's own slots bound its runs over all calls;
// a run that cannot get one within its timeout says so, and the other
// providers of the same call are not held up.
func TestProviderSlots(t *testing.T) {
	e := newEnv(t)
	b := newBarrier(t, e)
	busy := b.cli(e.text("busy", "text"), "busy") // holds its slot until released
	busy.MaxInFlight = 1
	r := e.build(Config{Providers: map[string]ProviderConfig{"busy": busy, "free": e.text("free", "text")}})
	first := make(chan *dispatch.Envelope, 1)
	go func() { first <- r.call("consult", `{"prompt":"q","provider":"busy"}`, nil) }()
	if name := <-b.arrived; name != "busy" { // the first call holds busy's one slot
		t.Fatalf("%s arrived", name)
	}
	start := time.Now()
	m := r.many(`{"prompt":"q","providers":["busy","free"],"synthesize":false,"timeout":0.5}`)
	b.pass("busy")
	if got := m.Responses["busy"]; got.Status != StatusTimeout || !strings.Contains(deref(got.Error), "no free slot within 500ms") {
		t.Errorf("busy: %s %v", got.Status, deref(got.Error))
	}
	// Not held up: free ended before busy's wait for a slot did.
	if got := m.Responses["free"]; got.Status != StatusSuccess || got.Duration >= m.Responses["busy"].Duration {
		t.Errorf("free: %s after %vs, busy gave up after %vs", got.Status, got.Duration, m.Responses["busy"].Duration)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the call took %v", took)
	}
	if env := <-first; env.Status != dispatch.StatusSuccess {
		t.Errorf("the slot's holder: %s %+v", env.Status, env.Error)
	}
}
