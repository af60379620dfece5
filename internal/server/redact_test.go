package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCanaryCorpusRedacted sends every canary file of the sanitizer's corpus
// (one per kind of secret or personal data, realistic fake values) through
// the real server to a tool that echoes it back, with debug logging on: no
// value may come back in the response or reach any log line.
func TestCanaryCorpusRedacted(t *testing.T) {
	dir := filepath.Join("..", "sanitize", "testdata", "canary")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]struct {
		Kind   string
		Values []string
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{})
	values := 0
	for file, c := range manifest {
		if c.Kind == "ip_address" {
			continue // opt-in kind, off by default
		}
		text, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"message": string(text), "data": map[string]any{"copy": string(text)}})
		r := h.exec("echo", string(body), nil)
		if r.status != 200 || r.env.Sanitized.Redactions == 0 {
			t.Errorf("%s: %d, %d redactions", file, r.status, r.env.Sanitized.Redactions)
		}
		for _, v := range c.Values {
			values++
			if strings.Contains(string(r.body), v) || strings.Contains(string(r.body), jsonEscaped(v)) {
				t.Errorf("%s: %s value %.12q… came back in the response", file, c.Kind, v)
			}
		}
	}
	if values < 50 {
		t.Fatalf("only %d canary values: is the corpus there?", values)
	}
	entries := h.logs.All()
	if len(h.logs.FilterMessage("call").All()) == 0 {
		t.Fatal("no debug line logged the calls: the log half of this test checked nothing")
	}
	for _, e := range entries {
		var line strings.Builder // every field's raw text: strings, and bytes as logged
		for _, f := range e.Context {
			line.WriteString(f.String)
			if b, ok := f.Interface.([]byte); ok {
				line.Write(b)
			}
			line.WriteByte('\n')
		}
		for _, c := range manifest {
			if c.Kind == "ip_address" {
				continue
			}
			for _, v := range c.Values {
				if strings.Contains(line.String(), v) || strings.Contains(line.String(), jsonEscaped(v)) {
					t.Errorf("a %s value reached the log (%q)", c.Kind, e.Message)
				}
			}
		}
	}
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}
