package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/testpeer"
)

// TestDesktopWorkflow: .github/workflows/desktop.yml, which runs the
// macOS and Windows sandboxes' tests on real machines for anyone who
// builds toold on a hosted CI, passes actionlint (which fails a broken
// copy of it), runs on macOS (Apple silicon and Intel) and Windows
// runners with TOOLD_REQUIRE_SANDBOX=1, vets every target, and runs the
// launcher's tests and the built toold's selftest there.
func TestDesktopWorkflow(t *testing.T) {
	lint := testpeer.Binary(t, "TOOLD_ACTIONLINT", "actionlint", "TOOLD_REQUIRE_ACTIONLINT",
		"actionlint is not installed: build it with `(cd tools/actionlint && go build -o \"$(go env GOPATH)/bin/actionlint\" "+
			"github.com/rhysd/actionlint/cmd/actionlint)` and set TOOLD_ACTIONLINT to its path (as .ci/run does)")
	path := filepath.Join("..", "..", ".github", "workflows", "desktop.yml")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(lint, "-no-color", path).CombinedOutput(); err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
	broken := filepath.Join(t.TempDir(), "broken.yml")
	if err := os.WriteFile(broken, []byte(strings.Replace(string(src), "macos-15-intel", "macos-15-intell", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(lint, "-no-color", broken).CombinedOutput(); err == nil {
		t.Errorf("actionlint passed a workflow with an unknown runner label:\n%s", out)
	}
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					OS []string `yaml:"os"`
				} `yaml:"matrix"`
			} `yaml:"strategy"`
			Env   map[string]string `yaml:"env"`
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(src, &wf); err != nil {
		t.Fatal(err)
	}
	job, ok := wf.Jobs["sandbox"]
	if !ok {
		t.Fatal("no sandbox job")
	}
	for _, want := range []string{"macos-15", "macos-15-intel", "windows-2025"} {
		if !slices.Contains(job.Strategy.Matrix.OS, want) {
			t.Errorf("the job does not run on %s: %v", want, job.Strategy.Matrix.OS)
		}
	}
	if job.Env["TOOLD_REQUIRE_SANDBOX"] != "1" {
		t.Error("a mode that does not work on the runner would skip, not fail")
	}
	var runs strings.Builder
	for _, s := range job.Steps {
		runs.WriteString(s.Run + "\n")
	}
	for _, want := range []string{"darwin/arm64 darwin/amd64 windows/amd64", "go vet -trimpath ./...",
		"go test -count=1 ./internal/launch/...", "-run TestSandboxSelftest ./cmd/toold", "sandbox selftest"} {
		if !strings.Contains(runs.String(), want) {
			t.Errorf("no step runs %q", want)
		}
	}
}
