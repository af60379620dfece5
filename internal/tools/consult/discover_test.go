package consult

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toold/toold/internal/dispatch"
)

func (r *rig) providers(args string) map[string]providerInfo {
	r.t.Helper()
	env := r.call("consult_providers", args, nil)
	if env.Status != dispatch.StatusSuccess {
		r.t.Fatalf("consult_providers: %s %+v", env.Status, env.Error)
	}
	var out providersOut
	if err := json.Unmarshal(env.Data, &out); err != nil {
		r.t.Fatal(err)
	}
	m := map[string]providerInfo{}
	for _, p := range out.Providers {
		m[p.Name] = p
	}
	return m
}

// TestDiscovery: installed means found on the sandbox's PATH; working
// means the version flag answered within the detection timeout; an API
// works when its models list answers. Answers are remembered until the
// TTL passes or refresh is asked.
func TestDiscovery(t *testing.T) {
	e := newEnv(t)
	missing := e.cli("missing", "json")
	missing.Command = "no-such-ai-cli"
	off := false
	disabled := e.cli("disabled", "json")
	disabled.Enabled = &off
	good := e.cli("good", "json")
	good.Models, good.DefaultModel = []string{"pro", "flash"}, "pro"
	r := e.build(Config{Providers: map[string]ProviderConfig{"good": good, "missing": missing, "disabled": disabled,
		"broken": e.cli("broken", "version-fail"), "hang": e.cli("hang", "version-hang"), "api": e.apiProvider("small")},
		Timeouts: Timeouts{Detection: 400 * time.Millisecond}, DetectionTTL: time.Hour,
		Routing: map[string][]string{"assertion": {"good", "api"}}})
	start := time.Now()
	got := r.providers(`{}`)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("discovery took %v: the checks did not run in parallel, or the hang was not bounded", took)
	}
	for name, want := range map[string]struct {
		enabled, installed, working bool
		detail, version             string
	}{
		"good":     {true, true, true, "", "fake-ai 1.2.3 (json)"},
		"missing":  {true, false, false, "not installed: program \"no-such-ai-cli\" is not found on PATH", ""},
		"broken":   {true, true, false, "fake-ai --version failed (exit 2", ""},
		"hang":     {true, true, false, "fake-ai --version did not answer within 400ms (timeouts.detection)", ""},
		"disabled": {false, false, false, "disabled in the configuration", ""},
		"api":      {true, true, true, "", ""},
	} {
		p := got[name]
		if p.Enabled != want.enabled || p.Installed != want.installed || p.Working != want.working ||
			!strings.Contains(deref(p.Detail), want.detail) || deref(p.Version) != want.version {
			t.Errorf("%s: %+v (detail %q, version %q)", name, p, deref(p.Detail), deref(p.Version))
		}
	}
	if g := got["good"]; strings.Join(g.Models, ",") != "pro,flash" || deref(g.DefaultModel) != "pro" ||
		g.Where["containment"] == nil || g.CheckedAt == nil || g.MaxInFlight != DefaultMaxInFlight || g.Timeout != 90 {
		t.Errorf("good: %+v", g)
	}
	if a := got["api"]; strings.Join(a.AvailableModels, ",") != "small,large" || deref(a.Breaker) != "closed" ||
		a.Where["endpoint"] == nil || a.Kind != "api" {
		t.Errorf("api: %+v", a)
	}
	// Remembered: no version check runs again until refresh is asked.
	checks := strings.Count(e.recorded("good", "versions"), "x")
	r.providers(`{}`)
	r.one(`{"prompt":"q","failure_type":"assertion"}`)
	if n := strings.Count(e.recorded("good", "versions"), "x"); n != checks {
		t.Errorf("%d version checks after remembered answers, want %d", n, checks)
	}
	r.providers(`{"refresh":true}`)
	if n := strings.Count(e.recorded("good", "versions"), "x"); n != checks+1 {
		t.Errorf("%d version checks after refresh, want %d", n, checks+1)
	}
	// An API whose models list fails is not working.
	e.api.mu.Lock()
	e.api.modelsOK = false
	e.api.mu.Unlock()
	if a := r.providers(`{"refresh":true}`)["api"]; a.Working || !strings.Contains(deref(a.Detail), "503") {
		t.Errorf("api down: %+v %q", a, deref(a.Detail))
	}
}

// probes is a provider that counts its availability checks.
type probes struct{ n atomic.Int32 }

func (p *probes) ask(context.Context, query) outcome { return outcome{} }
func (p *probes) where() map[string]any              { return nil }
func (p *probes) probe(context.Context, time.Duration) availability {
	p.n.Add(1)
	return availability{Installed: true, Working: true}
}

// TestDiscoveryTTL: a remembered answer serves until the TTL has passed,
// to the nanosecond, then the provider is checked again; refresh checks
// at once. synctest's clock passes the TTL: the test does not wait for
// it. (TestDiscovery counts the real CLI's version checks.)
func TestDiscoveryTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := newDiscovery(200*time.Millisecond, time.Second)
		pr := &probes{}
		p := &provider{spec: &spec{name: "good"}, impl: pr}
		for _, step := range []struct {
			wait    time.Duration
			refresh bool
			want    int32
		}{
			{0, false, 1}, {0, false, 1}, // checked, then remembered
			{199 * time.Millisecond, false, 1}, // within the TTL
			{time.Millisecond, false, 2},       // the TTL has passed
			{0, false, 2}, {0, true, 3},        // remembered again; refresh asked
		} {
			time.Sleep(step.wait)
			if a := d.check(ctx, p, step.refresh); !a.usable() || pr.n.Load() != step.want {
				t.Fatalf("after %v (refresh %v): %d checks, want %d", step.wait, step.refresh, pr.n.Load(), step.want)
			}
		}
	})
}

// TestTimeoutsPerOperation: consultation (the section's and a provider's
// own), review, the call's timeout (shortens only), and the call's
// deadline, each bounding a provider that never answers.
func TestTimeoutsPerOperation(t *testing.T) {
	e := newEnv(t)
	own := e.text("own", "sleep")
	own.Timeout = 300 * time.Millisecond
	patient := e.text("patient", "sleep")
	patient.Timeout = time.Minute
	r := e.build(Config{Providers: map[string]ProviderConfig{"sleepy": e.text("sleepy", "sleep"), "own": own, "patient": patient},
		Timeouts: Timeouts{Consultation: 500 * time.Millisecond, Review: 900 * time.Millisecond}})
	for _, tc := range []struct {
		args string
		want time.Duration
	}{
		{`{"prompt":"q","provider":"sleepy"}`, 500 * time.Millisecond},
		{`{"prompt":"q","provider":"own"}`, 300 * time.Millisecond},
		{`{"prompt":"q","provider":"sleepy","operation":"review"}`, 900 * time.Millisecond},
		{`{"prompt":"q","provider":"own","operation":"review"}`, 900 * time.Millisecond},
		{`{"prompt":"q","provider":"sleepy","timeout":0.2}`, 200 * time.Millisecond},
		{`{"prompt":"q","provider":"sleepy","timeout":30}`, 500 * time.Millisecond}, // never lengthens
	} {
		resp := r.one(tc.args)
		if resp.Status != StatusTimeout || !strings.Contains(deref(resp.Error), "no answer within "+tc.want.String()) {
			t.Errorf("%s: %s %q, want a timeout of %v", tc.args, resp.Status, deref(resp.Error), tc.want)
		}
		// The deadline is set a moment before the response's clock starts:
		// a duration a hair under the timeout (299ms for 300ms) is right.
		if d := time.Duration(resp.Duration * float64(time.Second)); d < tc.want*9/10 || d > tc.want+3*time.Second {
			t.Errorf("%s: took %v", tc.args, d)
		}
	}
	// The call's deadline (Toold-Timeout) is kept: the provider is
	// stopped before it, and the call still answers with its response.
	// The deadline (2 s) binds, not the provider's minute; the reserve
	// kept for stopping it is a tenth, 200ms: room on a loaded machine,
	// where 400ms left 40ms and the pipeline's timeout sometimes won.
	start := time.Now()
	env := r.disp.Execute(t.Context(), &dispatch.Request{Tool: "consult", Body: []byte(`{"prompt":"q","provider":"patient"}`),
		Timeout: 2 * time.Second})
	var resp Response
	_ = json.Unmarshal(env.Data, &resp)
	if env.Status != dispatch.StatusSuccess || resp.Status != StatusTimeout || time.Since(start) > 5*time.Second {
		t.Errorf("under a 2s deadline: %s %s %v after %v", env.Status, resp.Status, deref(resp.Error), time.Since(start))
	}
}

// TestPromptIsRedactedBeforeItLeaves: a secret and personal data in a
// prompt reach neither a CLI nor an API; the envelope says how many
// redactions the input had. The answers sent to the synthesis provider
// pass the redactor too: a secret a provider's answer carries never
// reaches it.
func TestPromptIsRedactedBeforeItLeaves(t *testing.T) {
	e := newEnv(t)
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "api": e.apiProvider("small"),
		"leaky": e.text("leaky", "leak"), "judge": e.text("judge", "echo")}, Synthesis: "judge"})
	const key, mail = "AKIAQYLPMN5HHHFPZAM2", "jane.doe@example.org"
	const answered = "AKIAZRQXWNMLTKBVCDF3" // in leaky's answer (testdata/fake-ai), not in the prompt
	prompt := "Deploy fails with key " + key + " for user " + mail + "; why?"
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "providers": []string{"gem", "api", "leaky"}})
	env := r.call("consult_many", string(body), nil)
	if env.Status != dispatch.StatusSuccess {
		t.Fatalf("%s %+v", env.Status, env.Error)
	}
	got := e.recorded("gem", "prompt")
	if strings.Contains(got, key) || strings.Contains(got, mail) || !has(got, "[REDACTED:", "Deploy fails with key") {
		t.Errorf("the CLI received %q", got)
	}
	if sent := e.api.lastBody(); !strings.Contains(sent, "[REDACTED:") {
		t.Errorf("the API received %s", sent)
	} else if strings.Contains(e.apiBodies(), key) || strings.Contains(e.apiBodies(), mail) {
		t.Errorf("the API received the secret: %s", e.apiBodies())
	}
	if env.Sanitized.Redactions < 2 {
		t.Errorf("sanitized %+v", env.Sanitized)
	}
	j := e.recorded("judge", "prompt")
	if !has(j, "## Answer from leaky", "rotate the key [REDACTED:", "## Answer from gem", "## Answer from api") {
		t.Errorf("the synthesis provider did not get every answer, the key redacted: %q", j)
	}
	if strings.Contains(j, answered) || strings.Contains(j, key) || strings.Contains(j, mail) {
		t.Errorf("the synthesis provider received a secret: %q", j)
	}
}

func (e *env) apiBodies() string {
	e.api.mu.Lock()
	defer e.api.mu.Unlock()
	return strings.Join(e.api.bodies, "\n")
}
