package command

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
	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/testpeer"
)

// loadExample decodes testdata/example.yaml strictly, as toold's loader does.
func loadExample(t *testing.T) Config {
	t.Helper()
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := validateConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestExampleConfig(t *testing.T) {
	cfg := loadExample(t)
	testpeer.Git(t)
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Dir(ws), 0o755)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "a.txt")
	git("commit", "-q", "-m", "first")
	if err := os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Tools = cfg.Tools[:2] // go_test needs a Go toolchain and module cache laid out as documented
	s, err := build(t, cfg, ws)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Options{}, s.Tools()...)
	if err != nil {
		t.Fatalf("the registry refuses the example's tools: %v", err)
	}
	for _, e := range reg.Entries() {
		if e.Spec.Limits.Timeout != 30*time.Second || e.Spec.Limits.MaxInFlight != 10 {
			t.Errorf("%s: limits %+v, want the system_command defaults", e.Spec.Name, e.Spec.Limits)
		}
	}
	t.Log(strings.Join(s.Describe(), "\n"))
	r, err := call(t, tool(t, s, "git_status"), map[string]any{}, 10*time.Second)
	if err != nil || !r.OK {
		t.Fatalf("git_status: %+v %v", r, err)
	}
	if diff := cmp.Diff([]string{"## main", "?? b.txt"}, r.Parsed); diff != "" {
		t.Errorf("git_status (-want +got):\n%s", diff)
	}
	r, err = call(t, tool(t, s, "git_log"), map[string]any{"max_count": 5, "path": "a.txt"}, 10*time.Second)
	if err != nil || !r.OK || len(r.Parsed.([]string)) != 1 || !strings.HasSuffix(r.Parsed.([]string)[0], "\tfirst") {
		t.Fatalf("git_log: %+v %v", r, err)
	}
	_, err = call(t, tool(t, s, "git_log"), map[string]any{"path": "--output=/tmp/pwned"}, 10*time.Second)
	if err != nil {
		t.Errorf("a dash path after the literal -- is an operand: %v", err)
	}
	if _, err := os.Stat("/tmp/pwned"); !errors.Is(err, os.ErrNotExist) {
		t.Error("git_log wrote /tmp/pwned")
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	ws := t.TempDir()
	cfg := Config{Config: launch.Config{Containment: "none"}, Tools: []ToolConfig{
		argvTool("bad name!", "true"),
		argvTool("missing", "no-such-program-x"),
		{Name: "tmpl", Description: "d", Argv: []Arg{{Arg: "true"}, {Arg: "{{.x"}}},
		{Name: "dir", Description: "d", Argv: []Arg{{Arg: "true"}}, Workdir: "../x"},
		{Name: "when", Description: "d", Argv: []Arg{{Arg: "true"}, {Arg: "x", When: "nope"}}},
		argvTool("dup", "true"), argvTool("dup", "true"),
	}}
	_, err := build(t, cfg, ws)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, name := range []string{`"bad name!"`, `"missing"`, `"tmpl"`, `"dir"`, `"when"`, `"dup": the name is used twice`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s:\n%v", name, err)
		}
	}
}
