package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sampleRun is the real `go test -json` of testdata/sample, a module
// whose tests pass, skip (with SKIPPED:, with another reason, with none,
// in a subtest) and fail.
func sampleRun(t *testing.T) []byte {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-json", "./...")
	cmd.Dir = filepath.Join("testdata", "sample")
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) { // the sample fails on purpose: exit status 1
		t.Fatal(err)
	}
	return out
}

// TestSampleRun: the counts, the skips by reason (the SKIPPED: line's
// text, t.Skip's message, none), the failed test's output and the
// package's line, and the exit status of a run with a failure.
func TestSampleRun(t *testing.T) {
	run1 := sampleRun(t)
	var out bytes.Buffer
	saved := filepath.Join(t.TempDir(), "run.json.gz")
	err := run([]string{"-every", "0", "-save", saved}, bytes.NewReader(run1), &out)
	if !errors.Is(err, errFailed) {
		t.Errorf("a run with a failure: %v, want errFailed", err)
	}
	got := out.String()
	for _, want := range []string{
		"--- FAIL example.test/sample TestFails\n",
		"sample_test.go:32: the failure's message\n",
		"FAIL  example.test/sample",
		"9 tests in 1 package (subtests counted): 4 passed, 4 skipped, 1 failed;",
		"    2  no OpenID Provider to test against. Build it with `(cd test/oidc && go build .)`\n",
		"    1  (no reason given)\n",
		"    1  containment none shares the host's | file system\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "a line a passing test logs") {
		t.Error("a passing test's output was printed")
	}

	// The compact run gives the same block as the whole one.
	whole := newReport(&bytes.Buffer{})
	if err := whole.read(bytes.NewReader(run1)); err != nil {
		t.Fatal(err)
	}
	f, err := openRun(saved)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	compact := newReport(&bytes.Buffer{})
	if err := compact.read(f); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(whole.block(), compact.block()); d != "" {
		t.Errorf("the compact run's block differs (-whole +compact):\n%s", d)
	}
	if !strings.Contains(whole.block(), "| 1 | containment none shares the host's \\| file system |") {
		t.Errorf("a | in a reason is not escaped in the block:\n%s", whole.block())
	}
}

// TestProgress: the heartbeat's line names the packages still running,
// the oldest first, with how long each has run and its tests so far.
func TestProgress(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	r := newReport(&bytes.Buffer{})
	for _, ev := range []event{
		{Time: t0, Action: "start", Package: module + "cmd/toold"},
		{Time: t0.Add(time.Second), Action: "start", Package: module + "internal/server"},
		{Time: t0.Add(2 * time.Second), Action: "start", Package: module + "internal/suggest"},
		{Action: "pass", Package: module + "cmd/toold", Test: "TestA"},
		{Action: "skip", Package: module + "cmd/toold", Test: "TestB"},
		{Action: "pass", Package: module + "internal/suggest", Test: "TestC"},
		{Time: t0.Add(3 * time.Second), Action: "pass", Package: module + "internal/suggest", Elapsed: 1},
	} {
		r.handle(ev)
	}
	got := r.progress(t0.Add(4*time.Minute), 4*time.Minute+time.Second)
	want := "… 4m1s: 1 package done, 3 tests so far (1 skipped, 0 failed); running: cmd/toold 4m0s (2 tests), internal/server 3m59s (0 tests)"
	if got != want {
		t.Errorf("progress:\n got %s\nwant %s", got, want)
	}
}

// TestReadmeBlock: README.md's skip count is this command's block,
// rendered from the committed run (testdata/readme-run.json.gz): a count
// typed by hand, or a block left behind by a change of the format, fails
// here. To count again: `make skips` (which runs the suite).
func TestReadmeBlock(t *testing.T) {
	f, err := openRun(filepath.Join("testdata", "readme-run.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := newReport(&bytes.Buffer{})
	if err := r.read(f); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	start, end, ok := readmeBlock(readme)
	if !ok {
		t.Fatal("README.md has no testreport block")
	}
	if d := cmp.Diff(r.block(), string(readme[start:end])); d != "" {
		t.Errorf("README.md's testreport block is not the one the committed run renders (-rendered +README); "+
			"rewrite it with `go run ./internal/testreport -in internal/testreport/testdata/readme-run.json.gz -readme README.md`:\n%s", d)
	}
}

// TestRewriteReadme: -readme replaces the block and nothing else, and
// says where the markers go when there are none.
func TestRewriteReadme(t *testing.T) {
	name := filepath.Join(t.TempDir(), "README.md")
	before := "# x\n\nintro\n" + blockStart + "\nold count\n" + blockEnd + "\nafter\n"
	if err := os.WriteFile(name, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewriteReadme(name, blockStart+"\nnew\n"+blockEnd+"\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(name)
	if want := "# x\n\nintro\n" + blockStart + "\nnew\n" + blockEnd + "\nafter\n"; string(got) != want {
		t.Errorf("rewritten:\n%s", got)
	}
	if err := os.WriteFile(name, []byte("no block\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewriteReadme(name, "x"); err == nil || !strings.Contains(err.Error(), blockEnd) {
		t.Errorf("a README without the markers: %v", err)
	}
}

// FuzzRead: any stream — events, broken JSON, text — is read without a
// panic, and renders a block that the block finder finds whole.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"Action":"start","Package":"p"}` + "\n" + `{"Action":"output","Package":"p","Test":"T","Output":"    x.go:1: SKIPPED: why\n"}` + "\n" +
		`{"Action":"skip","Package":"p","Test":"T"}` + "\n" + `{"Action":"pass","Package":"p","Elapsed":1}` + "\n"))
	f.Add([]byte("# p\nnot json\n{\"Action\":\"build-fail\",\"ImportPath\":\"p\"}\n{"))
	f.Add([]byte(`{"Action":"fail","Package":"p","Test":"T/|<!-- /testreport -->"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newReport(&bytes.Buffer{})
		if err := r.read(bytes.NewReader(in)); err != nil {
			return
		}
		r.summary()
		b := r.block()
		if start, end, ok := readmeBlock([]byte(b)); !ok || start != 0 || end != len(b) {
			t.Errorf("the block is not found whole: %d %d %v in %q", start, end, ok, b)
		}
		_ = r.compact()
	})
}
