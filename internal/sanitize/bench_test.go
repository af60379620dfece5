package sanitize

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusText concatenates a corpus directory's files, repeated to size.
func corpusText(tb testing.TB, dir string, size int) string {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
	var b strings.Builder
	for b.Len() < size {
		for _, f := range files {
			if strings.HasSuffix(f, "manifest.json") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			b.Write(data)
			b.WriteByte('\n')
		}
	}
	return b.String()[:size]
}

var benchSizes = []struct {
	name string
	size int
}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// BenchmarkDetect measures the detector (find + redact) on text: the
// figure the README compares with gitleaks.
func BenchmarkDetect(b *testing.B) {
	s := newTB(b, Config{})
	for _, corpus := range []string{"clean", "canary"} {
		for _, sz := range benchSizes {
			text := corpusText(b, corpus, sz.size)
			b.Run(corpus+"/"+sz.name, func(b *testing.B) {
				cpuLoop(b, len(text), func() { _ = s.RedactString("run_command", text) })
			})
		}
	}
}

// BenchmarkOutput measures the whole Output stage on a command result.
func BenchmarkOutput(b *testing.B) {
	s := newTB(b, Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: 4 << 20}}})
	for _, corpus := range []string{"clean", "canary"} {
		for _, sz := range benchSizes {
			data, _ := json.Marshal(map[string]any{"stdout": corpusText(b, corpus, sz.size), "exit_code": 0})
			b.Run(corpus+"/"+sz.name, func(b *testing.B) {
				cpuLoop(b, len(data), func() { _, _, _ = s.Output(context.Background(), commandSpec, data) })
			})
		}
	}
}
