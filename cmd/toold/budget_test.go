package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResultBudgetsFromConfig starts the real toold with a result budget
// declared in each place the configuration has one — server-wide, on a
// command tool, on an HTTP tool, on a hosted MCP server, and for a
// built-in under tools.<name> (0: none) — and checks each call's answer:
// a head within its tool's budget linked to the whole, which GET
// /artifacts/{id} returns; or the whole with no artifact where there is no
// budget.
func TestResultBudgetsFromConfig(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"items":["`+strings.Repeat("x", 20_000)+`"]}`)
	}))
	t.Cleanup(api.Close)
	up := newChangingUpstream(t)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a line of the file\n", 2000)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(cfg, []byte(`
server:
  max_result_bytes: 4096
tools:
  read_file: {max_result_bytes: 0}
commands:
  tools:
    - name: count
      description: Counts from 1 to n.
      parameters: {type: object, properties: {n: {type: integer, minimum: 1, maximum: 100000}}, required: [n], additionalProperties: false}
      argv: [seq, "1", "{{.n}}"]
      max_result_bytes: 2048
http:
  tools:
    - name: items
      description: Lists the items.
      parameters: {type: object, additionalProperties: false}
      request: {url: "`+api.URL+`/items"}
      allow: [127.0.0.1]
      allow_http: true
      max_result_bytes: 1024
mcp:
  servers:
    - {name: up, url: `+jsString(up.url)+`, allow: [127.0.0.1], allow_http: true, max_result_bytes: 3000}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", ws)
	for _, c := range []struct {
		tool, args string
		budget     int // 0: no artifact
	}{
		{"count", `{"n":20000}`, 2048},
		{"items", `{}`, 1024},
		{"up.greet", `{"name":"` + strings.Repeat("n", 10_000) + `"}`, 3000},
		{"read_file", `{"paths":["big.txt"]}`, 0},
	} {
		code, env := in.exec(c.tool, c.args)
		data := mustJSON(env["data"])
		art, _ := env["artifact"].(map[string]any)
		if code != 200 || env["success"] != true {
			t.Fatalf("%s: %d %.300s", c.tool, code, mustJSON(env))
		}
		if c.budget == 0 {
			if art != nil || len(data) < 30_000 {
				t.Errorf("%s, without a budget: %d bytes of data, artifact %v", c.tool, len(data), art)
			}
			continue
		}
		if art == nil || len(data) > c.budget {
			t.Errorf("%s: %d bytes of data (budget %d), artifact %v", c.tool, len(data), c.budget, art)
			continue
		}
		code, whole := in.get(art["uri"].(string))
		if code != 200 || float64(len(whole)) != art["bytes"] || len(whole) < 10_000 {
			t.Errorf("%s: GET %s: %d, %d bytes (%v)", c.tool, art["uri"], code, len(whole), art["bytes"])
		}
	}
}
