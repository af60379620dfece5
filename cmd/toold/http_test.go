package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHTTPToolThroughToold starts the real toold with an HTTP tool declared
// in YAML (a credential from the environment) calling an API on loopback,
// and drives it over HTTP: a call answered, the API's refusal as a
// user_error, its failure as 502, its breaker open as 503 with Retry-After
// and the state in the listing, a fallback answering for it, and the
// upstream metrics — every response held to the OpenAPI contract.
func TestHTTPToolThroughToold(t *testing.T) {
	var down atomic.Bool
	var calls atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer e2e-token-123":
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"Bad credentials"}`)
		case down.Load():
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"message":"database on fire"}`)
		case r.URL.Path == "/cities/Atlantis":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"no such city"}`)
		default:
			io.WriteString(w, `{"name":"`+strings.TrimPrefix(r.URL.Path, "/cities/")+`","main":{"temp":21.5},"echo":"e2e-token-123"}`)
		}
	}))
	t.Cleanup(api.Close)
	cache := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"name":"`+r.URL.Query().Get("city")+`","cached":true}`)
	}))
	t.Cleanup(cache.Close)
	cfg := filepath.Join(t.TempDir(), "http.yaml")
	os.WriteFile(cfg, []byte(`
http:
  breaker: {failures: 2, open_for: 1h}
  tools:
    - name: weather
      description: Current weather in a city.
      parameters: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}
      request: {url: "`+api.URL+`/cities/{city}"}
      auth: {bearer: "${E2E_TOKEN}"}
      response: {jq: '{city: .name, temperature: .main.temp, echo}'}
      retry: {attempts: 1}
      allow: [127.0.0.1]
      allow_http: true
    - name: weather_cache
      description: The last weather seen for a city.
      parameters: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}
      request: {url: "`+cache.URL+`/", query: {city: "{city}"}}
      allow: [127.0.0.1]
      allow_http: true
`), 0o644)
	in := start(t, map[string]string{"E2E_TOKEN": "e2e-token-123"}, "-config", cfg, "-workspace", workspace(t))

	code, env := in.exec("weather", `{"city":"Oslo"}`)
	if code != 200 || mustJSON(env["data"]) != `{"city":"Oslo","echo":"[REDACTED:credential]","temperature":21.5}` {
		t.Fatalf("a call: %d %v", code, env)
	}
	if timing := env["timing"].(map[string]any); timing["attempts"] != 1.0 {
		t.Errorf("timing %v", timing)
	}
	code, env = in.exec("weather", `{"city":"Atlantis"}`)
	if e := errorOf(env); code != 200 || e["type"] != "user_error" || !strings.Contains(e["message"].(string), "no such city") {
		t.Fatalf("the API's refusal: %d %v", code, env)
	}
	down.Store(true)
	code, env = in.exec("weather", `{"city":"Oslo"}`)
	if e := errorOf(env); code != 502 || e["code"] != "upstream_error" || e["retryable"] != true {
		t.Fatalf("the API's failure: %d %v", code, env)
	}
	in.exec("weather", `{"city":"Oslo"}`) // the second failure opens the breaker
	before := calls.Load()
	resp, err := in.client.Post(in.url+"/tools/weather/execute", "application/json", strings.NewReader(`{"city":"Oslo"}`))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if e := errorOf(env); resp.StatusCode != 503 || e["code"] != "circuit_open" || resp.Header.Get("Retry-After") == "" || calls.Load() != before {
		t.Fatalf("the open breaker: %d %v (Retry-After %q)", resp.StatusCode, env, resp.Header.Get("Retry-After"))
	}
	_, listing := in.get("/tools")
	if !strings.Contains(string(listing), `"breaker": "open"`) {
		t.Errorf("the listing does not show the open breaker")
	}

	// The operator adds a fallback: the next toold answers from the cache.
	cfgBytes, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(cfgBytes, []byte("tools:\n  weather: {fallback: [weather_cache]}\n")...), 0o644)
	in2 := start(t, map[string]string{"E2E_TOKEN": "e2e-token-123"}, "-config", cfg, "-workspace", workspace(t))
	code, env = in2.exec("weather", `{"city":"Oslo"}`)
	from, _ := env["fallback_from"].([]any)
	if code != 200 || env["tool"] != "weather_cache" || len(from) != 1 || !strings.Contains(mustJSON(from[0]), "upstream_error") {
		t.Fatalf("the fallback: %d %v", code, env)
	}

	resp, err = http.Get(in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	host := strings.TrimPrefix(api.URL, "http://")
	for _, want := range []string{
		`toold_upstream_attempts_total{host="` + host + `",outcome="2xx",tool="weather"} 1`,
		`toold_upstream_attempts_total{host="` + host + `",outcome="5xx",tool="weather"} 2`,
		`toold_upstream_circuit_state{host="` + host + `",state="open"} 1`,
		`toold_upstream_refusals_total{reason="circuit_open",tool="weather"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func errorOf(env map[string]any) map[string]any {
	e, _ := env["error"].(map[string]any)
	if e == nil {
		return map[string]any{}
	}
	return e
}
