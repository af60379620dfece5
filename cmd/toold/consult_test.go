package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsultThroughToold starts the real toold with consultation
// providers declared in YAML — two fake CLIs (the consult package's
// testdata/fake-ai: one gemini-style JSON, one plain text), a CLI that is
// not installed, and a model API on loopback — and drives it over HTTP:
// discovery, a consultation of two providers with synthesis, a routed
// consult, the stream labelled by provider, a secret redacted before it
// leaves, refusals, and the metrics; every response held to the OpenAPI
// contract.
func TestConsultThroughToold(t *testing.T) {
	fakes := sharedWorkspace(t) // a directory the run-as uid can enter
	src, err := os.ReadFile("../../internal/tools/consult/testdata/fake-ai")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(fakes, "fake-ai"), src, 0o755)
	var apiBodies bytes.Buffer
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"tiny"}]}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		apiBodies.Write(b)
		io.WriteString(w, `{"model":"tiny","choices":[{"message":{"role":"assistant","content":"Check the lock order."},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(api.Close)
	cfg := filepath.Join(t.TempDir(), "consult.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
consult:
  providers:
    gemini:
      command: fake-ai
      models: [pro, flash]
      default_model: pro
      sandbox: {path: [%[1]s, /usr/bin, /bin], env: {FAKE_MODE: json, FAKE_NAME: gemini}}
    codex:
      command: fake-ai
      sandbox: {path: [%[1]s, /usr/bin, /bin], env: {FAKE_MODE: text, FAKE_NAME: codex}}
    claude:
      command: claude-not-installed-here
    local:
      base_url: %[2]s/v1
      model: tiny
      allow: [127.0.0.1]
      allow_http: true
  routing:
    assertion: [claude, codex, gemini]
  synthesis: codex
`, fakes, api.URL)), 0o644)
	in := start(t, nil, "-config", cfg, "-workspace", sharedWorkspace(t))

	code, body := in.get("/tools")
	var listing struct {
		Tools []struct{ Name, Category string }
	}
	json.Unmarshal(body, &listing)
	subtasks := 0
	for _, tl := range listing.Tools {
		if strings.HasPrefix(tl.Name, "consult") && tl.Category == "subtask" {
			subtasks++
		}
	}
	if code != 200 || subtasks != 3 {
		t.Fatalf("listing: %d %.300s", code, body)
	}
	code, env := in.exec("consult_providers", `{}`)
	found := map[string]string{}
	for _, p := range env["data"].(map[string]any)["providers"].([]any) {
		p := p.(map[string]any)
		found[p["name"].(string)] = fmt.Sprintf("installed=%v working=%v version=%v", p["installed"], p["working"], p["version"])
	}
	for name, want := range map[string]string{"claude": "installed=false working=false version=<nil>",
		"gemini": "installed=true working=true version=fake-ai 1.2.3 (json)", "local": "installed=true working=true version=<nil>"} {
		if code != 200 || found[name] != want {
			t.Errorf("consult_providers: %s: %q, want %q", name, found[name], want)
		}
	}

	code, env = in.exec("consult_many", `{"prompt":"Why does TestTransfer deadlock?","providers":["gemini","codex","local"]}`)
	data, _ := env["data"].(map[string]any)
	if code != 200 || data["success_count"] != 3.0 || data["failure_count"] != 0.0 || data["synthesis"] == nil {
		t.Fatalf("consult_many: %d %v", code, env)
	}
	synth, _ := data["synthesis"].(string)
	if !strings.Contains(synth, "codex answers with model default to a prompt of") {
		t.Errorf("synthesis %q: not codex's answer to the synthesis prompt", synth)
	}
	gem := data["responses"].(map[string]any)["gemini"].(map[string]any)
	if gem["status"] != "success" || gem["model"] != "pro" || gem["exit_code"] != 0.0 ||
		!strings.HasPrefix(gem["output"].(string), "gemini answers with model pro") {
		t.Errorf("gemini's response: %v", gem)
	}

	code, env = in.exec("consult", `{"prompt":"expected 3, got 4","failure_type":"assertion"}`)
	data, _ = env["data"].(map[string]any)
	if code != 200 || data["tool"] != "codex" || data["status"] != "success" {
		t.Errorf("routed consult: %d %v", code, env)
	}

	// A secret in the prompt never reaches the API; the envelope counts it.
	code, env = in.exec("consult", `{"prompt":"token ghp_0123456789abcdefghijABCDEFGHIJ012345 fails","provider":"local"}`)
	if code != 200 || strings.Contains(apiBodies.String(), "ghp_0123456789") || !strings.Contains(apiBodies.String(), "[REDACTED:") {
		t.Errorf("redaction: %d, the API got %s", code, apiBodies.String())
	}
	if s, _ := env["sanitized"].(map[string]any); s["redactions"] != 1.0 {
		t.Errorf("sanitized %v", env["sanitized"])
	}

	// The stream: output labelled by provider, then the envelope.
	req, _ := http.NewRequest("POST", in.url+"/tools/consult_many/execute",
		strings.NewReader(`{"prompt":"q","providers":["gemini","codex"],"synthesize":false}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := in.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, resp)
	for _, want := range []string{`"stream":"gemini","chunk":"{\"response\": \"gemini answers`, `"stream":"codex","chunk":"codex answers`, "event: end"} {
		if !strings.Contains(events, want) {
			t.Errorf("the stream lacks %s:\n%s", want, events)
		}
	}

	for _, bad := range []string{`{"prompt":"q","provider":"gemni"}`, `{"prompt":""}`, `{"prompt":"q","provider":"gemini","model":"ultra"}`} {
		if code, env := in.exec("consult", bad); code != 400 {
			t.Errorf("%s: %d %v", bad, code, env)
		}
	}
	resp, err = http.Get(in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`toold_consult_responses_total{provider="gemini",status="success"}`,
		`toold_upstream_attempts_total{host="` + strings.TrimPrefix(api.URL, "http://") + `",outcome="2xx",tool="consult.local"}`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func readEvents(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// TestConsultConfigProblems: a routing table naming a provider that is not
// configured is a start-up error naming it, as -check-config reports.
func TestConsultConfigProblems(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(cfg, []byte("consult:\n  providers: {gemini: {}, codex: {}}\n  routing: {assertion: [gemini, cursor-agent]}\n"), 0o644)
	var out, errOut bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	err := run(context.Background(), []string{"-check-config", cfg, "-workspace", t.TempDir()}, noEnv, nil, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(),
		`consult.routing.assertion[1]: "cursor-agent" is not a configured provider (providers: codex, gemini)`) {
		t.Errorf("-check-config: %v\n%s", err, errOut.String())
	}
	// A model server on loopback that the SSRF guard was not told about is
	// refused at start, naming the provider.
	os.WriteFile(cfg, []byte("consult:\n  providers: {local: {base_url: \"http://127.0.0.1:11434/v1\", model: m, allow_http: true}}\n"), 0o644)
	errOut.Reset()
	err = run(context.Background(), []string{"-check-config", cfg, "-workspace", t.TempDir()}, noEnv, nil, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "consult.providers.local: consult.local: request.url:") ||
		!strings.Contains(errOut.String(), "127.0.0.1") {
		t.Errorf("-check-config: %v\n%s", err, errOut.String())
	}
}
