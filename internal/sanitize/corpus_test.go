package sanitize

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/tools"
)

var commandSpec = &tools.Spec{Name: "run_command", Category: tools.SystemCommand}

func newTB(tb testing.TB, cfg Config) *Sanitizer {
	tb.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// withIP is the default policy plus the opt-in ip_address kind.
var withIP = Config{Defaults: Policy{Detectors: map[string]bool{"ip_address": true}}}

func loadManifest(tb testing.TB) map[string]canaryFile {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "canary", "manifest.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]canaryFile
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func readFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// outputText runs text through Output as a command's stdout and returns
// the sanitized stdout and the report.
func outputText(tb testing.TB, s *Sanitizer, text string) (string, Report) {
	tb.Helper()
	data, _ := json.Marshal(map[string]string{"stdout": text})
	out, rep, err := s.Output(context.Background(), commandSpec, data)
	if err != nil {
		tb.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		tb.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return got["stdout"], rep
}

// TestCanaryCorpus: every canary value of every kind must be gone from
// the response (Output) and from debug logs (RedactString).
func TestCanaryCorpus(t *testing.T) {
	s := newTB(t, withIP)
	manifest := loadManifest(t)
	total, found := 0, 0
	for _, name := range sortedKeys(manifest) {
		c := manifest[name]
		text := readFile(t, filepath.Join("testdata", "canary", name))
		out, rep := outputText(t, s, text)
		logged := s.RedactString("run_command", text)
		for _, v := range c.Values {
			total++
			leakOut, leakLog := strings.Contains(out, v), strings.Contains(logged, v)
			if !leakOut && !leakLog {
				found++
			}
			if leakOut {
				t.Errorf("%s: %s value %q survives Output:\n%s", name, c.Kind, v, out)
			}
			if leakLog {
				t.Errorf("%s: %s value %q survives RedactString:\n%s", name, c.Kind, v, logged)
			}
		}
		if rep.ByKind[c.Kind] == 0 {
			t.Errorf("%s: no redaction counted as %s: %v", name, c.Kind, rep.ByKind)
		}
	}
	t.Logf("canary recall: %d/%d values redacted in %d files", found, total, len(manifest))
}

// TestCleanCorpus: realistic clean text comes through unchanged; every
// redaction there is a false positive.
func TestCleanCorpus(t *testing.T) {
	s := newTB(t, Config{})
	files, _ := filepath.Glob(filepath.Join("testdata", "clean", "*"))
	if len(files) < 8 {
		t.Fatalf("clean corpus has %d files", len(files))
	}
	fp := 0
	for _, f := range files {
		text := readFile(t, f)
		out, rep := outputText(t, s, text)
		fp += rep.Redactions
		if out != text {
			t.Errorf("%s changed by Output (%v):\n%s", f, rep.ByKind, diffLines(text, out))
		}
		if logged := s.RedactString("run_command", text); logged != text {
			t.Errorf("%s changed by RedactString:\n%s", f, diffLines(text, logged))
		}
	}
	// A JSON document as a tool's result, not as text inside one.
	doc := readFile(t, filepath.Join("testdata", "clean", "api_response.json"))
	var v any
	_ = json.Unmarshal([]byte(doc), &v)
	data, _ := json.Marshal(v)
	out, rep, _ := s.Output(context.Background(), &tools.Spec{Name: "http_get", Category: tools.ExternalAPI}, data)
	fp += rep.Redactions
	if string(out) != string(data) {
		t.Errorf("api_response.json as a result changed: %v\n%s", rep.ByKind, out)
	}
	t.Logf("clean corpus: %d files, %d false positives", len(files), fp)
	if fp > 0 {
		t.Fail()
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var d []string
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			d = append(d, "- "+al[i], "+ "+bl[i])
		}
	}
	return strings.Join(d, "\n")
}
