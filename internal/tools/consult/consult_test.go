package consult

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/launchtest"
	"github.com/toold/toold/internal/tools"
)

// statusCase is one provider behaviour and the response it must give.
type statusCase struct {
	provider string
	status   Status
	output   string // a substring of the output
	err      string // a substring of the error
	exitCode *int
}

func code(n int) *int { return &n }

// statusProviders are the providers of the status table: CLIs that print
// a gemini-style JSON wrapper, text, garbage, nothing, that fail, sleep past
// their timeout, ignore SIGTERM, flood their output or are not installed,
// and an API that answers, fails, answers garbage or is too slow.
func statusProviders(e *env) (Config, []statusCase) {
	short := func(p ProviderConfig) ProviderConfig { p.Timeout = 700 * time.Millisecond; return p }
	flood := e.cli("flood", "flood")
	flood.Sandbox.MaxOutputBytes = 64 << 10
	missing := e.cli("missing", "json")
	missing.Command = "no-such-ai-cli"
	api := func(model string) ProviderConfig {
		p := e.apiProvider(model)
		p.Timeout = 700 * time.Millisecond
		return p
	}
	cfg := Config{Providers: map[string]ProviderConfig{
		"json": e.cli("json", "json"), "notice": e.cli("notice", "json-notice"), "text": e.text("text", "text"),
		"garbage": e.cli("garbage", "garbage"), "empty": e.cli("empty", "empty"), "noanswer": e.cli("noanswer", "json-no-answer"),
		"fail": e.text("fail", "fail"), "jsonerror": e.cli("jsonerror", "json-error"),
		"iserror": e.cli("iserror", "json-is-error"), "sleepy": short(e.cli("sleepy", "sleep")),
		"stubborn": short(e.cli("stubborn", "ignore-term")), "flood": flood, "missing": missing,
		"api": e.apiProvider("small"), "apibroken": api("broken"), "apigarbage": api("garbage"),
		"apislow": api("slow"), "apiempty": api("empty"),
	}}
	cfg.Providers["iserror"] = func(p ProviderConfig) ProviderConfig {
		p.AnswerPath, p.ErrorPath = "result", "is_error"
		return p
	}(cfg.Providers["iserror"])
	cases := []statusCase{
		{"json", StatusSuccess, "json answers with model default to a prompt of 21 bytes", "", code(0)},
		{"notice", StatusSuccess, "notice answers", "", code(0)},
		{"text", StatusSuccess, "text answers with model default", "", code(0)},
		{"garbage", StatusInvalidOutput, "", "not the JSON expected", code(0)},
		{"empty", StatusInvalidOutput, "", "printed nothing", code(0)},
		{"noanswer", StatusInvalidOutput, "", "no answer at response", code(0)},
		{"fail", StatusError, "partial thoughts", "exited with status 3: fake-ai: the vendor refused the request (401)", code(3)},
		{"jsonerror", StatusError, "", "exited with status 1: quota exceeded for default", code(1)},
		{"iserror", StatusError, "", "reported a failure: not logged in", code(0)},
		{"sleepy", StatusTimeout, "", "no answer within 700ms", nil},
		{"stubborn", StatusTimeout, "", "no answer within 700ms", nil},
		{"flood", StatusInvalidOutput, "", "more than 65536 bytes on stdout", nil},
		{"missing", StatusNotFound, "", "no-such-ai-cli is not installed", nil},
		{"api", StatusSuccess, "api answers with model small to a prompt of 21 bytes", "", nil},
		{"apibroken", StatusError, "", "the model server crashed", nil},
		{"apigarbage", StatusInvalidOutput, "", "not JSON", nil},
		{"apislow", StatusTimeout, "", "no answer within 700ms", nil},
		{"apiempty", StatusInvalidOutput, "", "answer is empty", nil},
	}
	return cfg, cases
}

// TestStatuses: every status, from real processes and a real API.
func TestStatuses(t *testing.T) {
	e := newEnv(t)
	cfg, cases := statusProviders(e)
	r := e.build(cfg)
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			checkStatus(t, r, tc)
		})
	}
}

// TestOutputCapOfCommands: a CLI provider without a cap of its own has
// the commands section's, and says so when it floods past it.
func TestOutputCapOfCommands(t *testing.T) {
	e := newEnv(t)
	e.commands = launch.Config{MaxOutputBytes: 4096}
	r := e.build(Config{Providers: map[string]ProviderConfig{"flood": e.cli("flood", "flood")}})
	checkStatus(t, r, statusCase{"flood", StatusInvalidOutput, "", "more than 4096 bytes on stdout", nil})
}

func checkStatus(t *testing.T, r *rig, tc statusCase) {
	t.Helper()
	start := time.Now()
	resp := r.one(`{"prompt":"Why does it fail? ...","provider":"` + tc.provider + `"}`)
	took := time.Since(start)
	if resp.Tool != tc.provider || resp.Status != tc.status {
		t.Fatalf("tool %s status %s, want %s (error %v)", resp.Tool, resp.Status, tc.status, deref(resp.Error))
	}
	if !strings.Contains(resp.Output, tc.output) {
		t.Errorf("output %q lacks %q", resp.Output, tc.output)
	}
	if tc.err != "" && !strings.Contains(deref(resp.Error), tc.err) {
		t.Errorf("error %q lacks %q", deref(resp.Error), tc.err)
	}
	if tc.err == "" && resp.Error != nil {
		t.Errorf("error %q on success", *resp.Error)
	}
	if fmt.Sprint(deref2(resp.ExitCode)) != fmt.Sprint(deref2(tc.exitCode)) {
		t.Errorf("exit_code %v, want %v", deref2(resp.ExitCode), deref2(tc.exitCode))
	}
	if resp.Duration <= 0 || resp.Duration > took.Seconds()+0.01 || resp.Timestamp == "" {
		t.Errorf("duration %v (call took %v), timestamp %q", resp.Duration, took, resp.Timestamp)
	}
	if tc.status == StatusTimeout && took > 5*time.Second {
		t.Errorf("a timeout of 700ms took %v to answer", took)
	}
	if _, ok := resp.Metadata["kind"]; !ok {
		t.Errorf("metadata %v lacks kind", resp.Metadata)
	}
}

func deref2(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestStatusesInEveryContainment: the CLI statuses hold in each
// containment this machine provides, and a CLI that ignores SIGTERM leaves
// no process behind.
func TestStatusesInEveryContainment(t *testing.T) {
	for _, mode := range []string{"namespaces", "bwrap"} {
		t.Run(mode, func(t *testing.T) {
			needMode(t, mode)
			e := newEnv(t)
			// bwrap gives the CLI a /tmp of its own: nothing to record into.
			e.containment, e.record = mode, ""
			cfg, cases := statusProviders(e)
			r := e.build(cfg)
			for _, tc := range cases {
				if r.set.providers[tc.provider].spec.kind == "cli" {
					t.Run(tc.provider, func(t *testing.T) { t.Parallel(); checkStatus(t, r, tc) })
				}
			}
		})
	}
}

// needMode skips t when this machine cannot provide the containment mode
// (fails it where a sandbox is required): a provider's error is a config
// problem's text by the time New reports it, so the mode is asked of a
// launcher of its own.
func needMode(t *testing.T, mode string) {
	t.Helper()
	l, err := launch.New(launch.Config{}, sharedDir(t, 0o755)) // the run-as uid's to reach
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Runner(launch.Sandbox{Containment: mode}); errors.Is(err, launch.ErrUnavailable) {
		launchtest.Unavailable(t, "containment %s is not available here: %v", mode, err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// TestStubbornTreeIsKilled: a CLI that ignores SIGTERM and left a child is
// gone, child and all, once its timeout response is answered.
func TestStubbornTreeIsKilled(t *testing.T) {
	e := newEnv(t)
	p := e.cli("stubborn", "ignore-term")
	p.Timeout = 300 * time.Millisecond
	marker := fmt.Sprintf("stubborn-%d", time.Now().UnixNano())
	p.Sandbox.Env["FAKE_MARKER"] = marker
	r := e.build(Config{Providers: map[string]ProviderConfig{"stubborn": p}})
	if resp := r.one(`{"prompt":"hello","provider":"stubborn"}`); resp.Status != StatusTimeout {
		t.Fatalf("status %s", resp.Status)
	}
	if pids := procsWith(marker); len(pids) > 0 {
		t.Errorf("processes left after the timeout: %v", pids)
	}
}

// TestModelSelection: the call's model (from the list), the failure
// type's, the default, or none (the CLI chooses, no flag is passed).
func TestModelSelection(t *testing.T) {
	e := newEnv(t)
	withModels := e.cli("gem", "json")
	withModels.Models = []string{"pro", "flash"}
	withModels.DefaultModel = "pro"
	withModels.FailureModels = map[string]string{"timeout": "flash"}
	api := e.apiProvider("small")
	api.FailureModels = map[string]string{"import": "large"}
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": withModels, "plain": e.text("plain", "text"), "api": api}})
	for _, tc := range []struct {
		args, model, args2 string
	}{
		{`{"prompt":"q","provider":"gem","model":"flash"}`, "flash", "-m flash"},
		{`{"prompt":"q","provider":"gem","failure_type":"timeout"}`, "flash", "-m flash"},
		{`{"prompt":"q","provider":"gem","failure_type":"assertion"}`, "pro", "-m pro"},
		{`{"prompt":"q","provider":"gem"}`, "pro", "-m pro"},
		{`{"prompt":"q","provider":"plain"}`, "default", "exec -- q"},
		{`{"prompt":"q","provider":"plain","model":"any-model:7b"}`, "any-model:7b", "exec -m any-model:7b -- q"},
		{`{"prompt":"q","provider":"api","failure_type":"import"}`, "large", ""},
		{`{"prompt":"q","provider":"api"}`, "small", ""},
	} {
		resp := r.one(tc.args)
		if !strings.Contains(resp.Output, "with model "+tc.model+" ") {
			t.Errorf("%s: output %q, want model %s", tc.args, resp.Output, tc.model)
		}
		if tc.args2 != "" && !strings.Contains(e.recorded(resp.Tool, "args"), tc.args2) {
			t.Errorf("%s: argv %q, want %q", tc.args, e.recorded(resp.Tool, "args"), tc.args2)
		}
		if tc.model != "default" && deref(resp.Model) != tc.model {
			t.Errorf("%s: model %v", tc.args, deref(resp.Model))
		}
	}
	// A model outside the provider's list is refused before anything runs.
	env := r.call("consult", `{"prompt":"q","provider":"gem","model":"ultra"}`, nil)
	if env.Status != dispatch.StatusRejected || env.Error.Fields[0].Pointer != "/model" ||
		!strings.Contains(env.Error.Message, "not a model of gem (models: pro, flash)") {
		t.Errorf("unknown model: %s %+v", env.Status, env.Error)
	}
	if env := r.call("consult", `{"prompt":"q","provider":"plain","model":"-rf"}`, nil); env.Status != dispatch.StatusRejected {
		t.Errorf("a model that is an option: %s", env.Status)
	}
}

// TestRouting: without a provider, the failure type's route gives the
// first available one, skipping the missing and the broken and saying so.
func TestRouting(t *testing.T) {
	e := newEnv(t)
	missing := e.cli("missing", "json")
	missing.Command = "no-such-ai-cli"
	off := false
	disabled := e.cli("disabled", "json")
	disabled.Enabled = &off
	r := e.build(Config{
		Providers: map[string]ProviderConfig{"missing": missing, "broken": e.cli("broken", "version-fail"),
			"good": e.cli("good", "json"), "other": e.text("other", "text"), "disabled": disabled},
		Routing: map[string][]string{"assertion": {"disabled", "missing", "broken", "good", "other"},
			"import": {"other", "good"}, "default": {"other"}, "nothing": {"missing", "broken"}},
	})
	resp := r.one(`{"prompt":"q","failure_type":"assertion"}`)
	if resp.Tool != "good" || resp.Status != StatusSuccess || resp.Metadata["routed_by"] != "routing.assertion" {
		t.Fatalf("assertion routed to %s (%s), %v", resp.Tool, resp.Status, resp.Metadata)
	}
	skipped, _ := json.Marshal(resp.Metadata["route_skipped"])
	if !has(string(skipped), `"provider":"disabled","reason":"disabled"`, `"provider":"missing","reason":"not installed`,
		`"provider":"broken","reason":"fake-ai --version failed (exit 2`, "cannot find its runtime") {
		t.Errorf("route_skipped %s", skipped)
	}
	for args, want := range map[string]string{
		`{"prompt":"q","failure_type":"import"}`:   "other",
		`{"prompt":"q","failure_type":"segfault"}`: "other", // not in the table: the default route
		`{"prompt":"q"}`:                                      "other",
		`{"prompt":"q","provider":"good"}`:                    "good",
		`{"prompt":"q","provider":"missing"}`:                 "missing", // named: it runs, and says not_found
		`{"prompt":"q","failure_type":"import","model":"m1"}`: "other",
	} {
		if got := r.one(args); got.Tool != want {
			t.Errorf("%s went to %s, want %s", args, got.Tool, want)
		}
	}
	env := r.call("consult", `{"prompt":"q","failure_type":"nothing"}`, nil)
	if env.Status != dispatch.StatusError || env.Error.Code != "no_provider" ||
		!has(env.Error.Message, "routing.nothing", "missing: not installed", "broken:") {
		t.Errorf("no available provider: %s %+v", env.Status, env.Error)
	}
	// Without a default route, every enabled provider by name.
	r2 := e.build(Config{Providers: map[string]ProviderConfig{"b": e.text("b", "text"), "a": missing}})
	if got := r2.one(`{"prompt":"q"}`); got.Tool != "b" || got.Metadata["routed_by"] != "every enabled provider, by name" {
		t.Errorf("no routing table: %s %v", got.Tool, got.Metadata)
	}
}

// TestBadInput: what is refused before anything runs.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "cod": e.text("cod", "text")},
		MaxPromptBytes: 1000})
	for _, tc := range []struct {
		tool, args, pointer, say string
	}{
		{"consult", `{"prompt":"q","provider":"gemni"}`, "/provider", ""},
		{"consult", `{"prompt":""}`, "/prompt", ""},
		{"consult", `{"prompt":"  \n\t "}`, "/prompt", "is empty"},
		{"consult", `{"prompt":"` + strings.Repeat("é", 600) + `"}`, "/prompt", "1200 bytes, over the cap of 1000"},
		{"consult", `{"prompt":"` + strings.Repeat("x", 1001) + `"}`, "/prompt", ""},
		{"consult", `{"prompt":"q","timeout":-1}`, "/timeout", ""},
		{"consult", `{"prompt":"q","operation":"rewrite"}`, "/operation", ""},
		{"consult_many", `{"prompt":"q","providers":["gem","nope"]}`, "/providers/1", ""},
		{"consult_many", `{"prompt":"q","providers":["gem","gem"]}`, "/providers", ""},
		{"consult_many", `{"prompt":"q","providers":[]}`, "/providers", ""},
		{"consult_many", `{"prompt":""}`, "/prompt", ""},
	} {
		env := r.call(tc.tool, tc.args, nil)
		if env.Status != dispatch.StatusRejected || env.Error == nil || len(env.Error.Fields) == 0 {
			t.Errorf("%s %s: %s %+v", tc.tool, tools.CutUTF8(tc.args, 80), env.Status, env.Error)
			continue
		}
		if env.Error.Fields[0].Pointer != tc.pointer || !strings.Contains(env.Error.Message, tc.say) {
			t.Errorf("%s %s: %+v", tc.tool, tools.CutUTF8(tc.args, 80), env.Error)
		}
	}
	if e.recorded("gem", "prompt") != "" || e.recorded("cod", "prompt") != "" {
		t.Error("a refused call reached a provider")
	}
}

// TestStreaming: output arrives labelled by provider, the synthesis by
// "synthesis".
func TestStreaming(t *testing.T) {
	e := newEnv(t)
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "cod": e.text("cod", "text"),
		"api": e.apiProvider("small")}, Synthesis: "cod"})
	var chunks []string
	env := r.call("consult_many", `{"prompt":"q"}`, &chunks)
	if env.Status != dispatch.StatusSuccess {
		t.Fatalf("%s %+v", env.Status, env.Error)
	}
	got := strings.Join(chunks, "\n")
	for _, want := range []string{`gem: {"response": "gem answers`, "cod: cod answers", "api: api answers",
		"synthesis: cod answers"} {
		if !strings.Contains(got, want) {
			t.Errorf("the stream lacks %q:\n%s", want, got)
		}
	}
}

// TestMetrics: each consultation is counted by provider and status.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "bad": e.cli("bad", "garbage")}})
	r.one(`{"prompt":"q","provider":"gem"}`)
	r.one(`{"prompt":"q","provider":"bad"}`)
	families, err := r.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			seen = append(seen, f.GetName()+"{"+strings.Join(labels, ",")+"}")
		}
	}
	for _, want := range []string{"toold_consult_responses_total{provider=gem,status=success}",
		"toold_consult_responses_total{provider=bad,status=invalid_output}", "toold_consult_response_duration_seconds{provider=gem}"} {
		if !slices.Contains(seen, want) {
			t.Errorf("metrics lack %s: %v", want, seen)
		}
	}
}

// procsWith lists the pids whose environment holds marker.
func procsWith(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
