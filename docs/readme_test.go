package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeNamesEveryPeer: the README's Tests section names every
// optional peer of the tests — each directory under test/ and the
// programs the skip helpers look for — says how many tests skip on a
// plain machine (internal/testreport's block, which TestReadmeBlock holds
// to the run it was counted from), and how to count them.
func TestReadmeNamesEveryPeer(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Tests\n")
	if !ok {
		t.Fatal("README.md has no Tests section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	dirs, err := filepath.Glob("../test/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no test peers under test/: %v", err)
	}
	var want []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			want = append(want, "test/"+filepath.Base(d))
		}
	}
	want = append(want, "bubblewrap", "Chromium", "Jaeger", "Node.js")
	for _, peer := range want {
		if !strings.Contains(section, peer) {
			t.Errorf("README's Tests section does not name the peer %s", peer)
		}
	}
	if !regexp.MustCompile(`\*\*\d+\s+tests skip\*\*`).MatchString(section) {
		t.Error("README's Tests section does not say how many tests skip on a plain machine")
	}
	if !strings.Contains(section, "go test -race -json ./... | go run ./internal/testreport") {
		t.Error("README's Tests section does not say how to count the skips (internal/testreport)")
	}
}

// TestQuickStartInstalls: the README's Quick start installs toold (every
// host configuration and `claude mcp add` start the installed binary),
// says where it goes, and its install line works as written: run from the
// repository's root with GOBIN a directory of the test's own, it leaves a
// toold there that runs.
func TestQuickStartInstalls(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no Quick start section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("the Quick start has no sh block")
	}
	var install string
	for line := range strings.Lines(m[1]) {
		if cmd, _, _ := strings.Cut(line, "#"); strings.HasPrefix(cmd, "go install ") {
			install = strings.TrimSpace(cmd)
		}
	}
	if install == "" {
		t.Fatalf("the Quick start's commands install no toold:\n%s", m[1])
	}
	if !strings.Contains(section, "$(go env GOPATH)/bin") {
		t.Error("the Quick start does not say where toold was installed")
	}
	if testing.Short() {
		t.Skip("SKIPPED: -short; the install line itself is run without it")
	}
	gobin := t.TempDir()
	fields := strings.Fields(install)
	cmd := exec.Command("go", fields[1:]...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", install, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "toold"), "-version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "toold") {
		t.Fatalf("the installed toold -version: %v %s", err, out)
	}
}
