// Package gitleakscmp measures gitleaks' detector against toold's
// sanitizer on the same corpora, side by side in one run. It is a module of
// its own so that gitleaks' dependencies (viper, cobra, wazero, go-re2,
// ...) stay out of toold's go.mod. Run from this directory:
//
//	go test -run TestCompare -v .
//	go test -run X -bench . -benchmem .
package gitleakscmp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/detect"

	"github.com/toold/toold/internal/sanitize"
)

const testdata = "../testdata"

// redactor is what both detectors are reduced to: text in, text out and
// the number of findings. optIn is toold with its opt-in ip_address kind
// on, for the canary corpus; the clean corpus gets the defaults.
type redactor struct {
	name          string
	redact, optIn func(string) (string, int)
}

func redactors(tb testing.TB) []redactor {
	tb.Helper()
	zerolog.SetGlobalLevel(zerolog.Disabled)
	gl, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		tb.Fatal(err)
	}
	withIP, err := sanitize.New(sanitize.Config{Defaults: sanitize.Policy{Detectors: map[string]bool{"ip_address": true}}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	s, _ := sanitize.New(sanitize.Config{}, nil)
	using := func(s *sanitize.Sanitizer) func(string) (string, int) {
		return func(text string) (string, int) {
			out := s.RedactString("run_command", text)
			n := strings.Count(out, "[REDACTED:")
			for _, k := range []string{"email", "phone_number", "payment_card", "iban", "us_ssn", "ip_address"} {
				toolPII += strings.Count(out, "[REDACTED:"+k+"]")
			}
			return out, n
		}
	}
	gitleaks := func(text string) (string, int) {
		// A gitleaks-based redactor replaces each finding's secret.
		fs := gl.DetectString(text)
		var pairs []string
		for _, f := range fs {
			glRules[f.RuleID]++
			if f.Secret != "" {
				pairs = append(pairs, f.Secret, "[REDACTED]")
			}
		}
		return strings.NewReplacer(pairs...).Replace(text), len(fs)
	}
	return []redactor{{"toold", using(s), using(withIP)}, {"gitleaks", gitleaks, gitleaks}}
}

// toolPII counts toold's personal-data findings, for the real-world report.
var toolPII int

// glRules counts gitleaks findings by rule, for the real-world report.
var glRules = map[string]int{}

type canaryFile struct {
	Kind   string   `json:"kind"`
	Values []string `json:"values"`
}

func read(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestCompare reports recall over the canary corpus (per kind: values no
// longer present after redaction) and false positives over the clean one.
func TestCompare(t *testing.T) {
	var manifest map[string]canaryFile
	if err := json.Unmarshal([]byte(read(t, filepath.Join(testdata, "canary", "manifest.json"))), &manifest); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(manifest))
	for n := range manifest {
		names = append(names, n)
	}
	sort.Strings(names)
	clean, _ := filepath.Glob(filepath.Join(testdata, "clean", "*"))
	for _, r := range redactors(t) {
		found, total, secretFound, secretTotal := 0, 0, 0, 0
		var missed []string
		for _, n := range names {
			c := manifest[n]
			out, _ := r.optIn(read(t, filepath.Join(testdata, "canary", n)))
			pii := map[string]bool{"email": true, "phone_number": true, "payment_card": true, "iban": true, "us_ssn": true, "ip_address": true}[c.Kind]
			hit := 0
			for _, v := range c.Values {
				if !strings.Contains(out, v) {
					hit++
				}
			}
			found, total = found+hit, total+len(c.Values)
			if !pii {
				secretFound, secretTotal = secretFound+hit, secretTotal+len(c.Values)
			}
			if hit < len(c.Values) {
				missed = append(missed, c.Kind)
			}
		}
		fp := 0
		for _, f := range clean {
			_, n := r.redact(read(t, f))
			fp += n
		}
		t.Logf("%-8s recall %d/%d (secrets %d/%d); false positives on %d clean files: %d; kinds missed: %s",
			r.name, found, total, secretFound, secretTotal, len(clean), fp, strings.Join(missed, ", "))
	}
}

func corpus(tb testing.TB, dir string, size int) string {
	files, _ := filepath.Glob(filepath.Join(testdata, dir, "*"))
	var b strings.Builder
	for b.Len() < size {
		for _, f := range files {
			if !strings.HasSuffix(f, "manifest.json") {
				b.WriteString(read(tb, f))
				b.WriteByte('\n')
			}
		}
	}
	return b.String()[:size]
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDetectors runs both on the same texts. cpuMB/s is bytes per
// second of the benchmarking thread's CPU time: the per-core figure,
// steady on a shared machine where wall-clock MB/s is not.
func BenchmarkDetectors(b *testing.B) {
	rs := redactors(b)
	for _, c := range []struct {
		corpus, name string
		size         int
	}{{"clean", "clean-64KiB", 64 << 10}, {"clean", "clean-1MiB", 1 << 20}, {"canary", "dense-64KiB", 64 << 10}, {"canary", "dense-1MiB", 1 << 20}} {
		text := corpus(b, c.corpus, c.size)
		for _, r := range rs {
			b.Run(c.name+"/"+r.name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				start, n := threadCPU(), 0
				for b.Loop() {
					r.redact(text)
					n++
				}
				b.ReportMetric(float64(len(text))*float64(n)/(threadCPU()-start).Seconds()/1e6, "cpuMB/s")
			})
		}
	}
}

// TestRealWorld counts findings over a tree of real text, where nearly
// every finding is a false positive (or a documented example). Set
// REALWORLD to a directory, e.g. $(go env GOROOT)/src.
func TestRealWorld(t *testing.T) {
	root := os.Getenv("REALWORLD")
	if root == "" {
		t.Skip("set REALWORLD to a directory of real text")
	}
	for _, r := range redactors(t) {
		toolPII, glRules = 0, map[string]int{}
		files, size, findings := 0, 0, 0
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Size() > 1<<20 || strings.Contains(p, "testdata") || strings.HasSuffix(p, "_test.go") ||
				!strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".py") && !strings.HasSuffix(p, ".md") && !strings.HasSuffix(p, ".json") {
				return nil
			}
			b, _ := os.ReadFile(p)
			_, n := r.redact(string(b))
			files, size, findings = files+1, size+len(b), findings+n
			return nil
		})
		t.Logf("%-8s %d files, %.1f MB: %d findings (personal data: %d)", r.name, files, float64(size)/1e6, findings, toolPII)
		if r.name == "gitleaks" {
			t.Logf("gitleaks rules: %v", glRules)
		}
	}
}
