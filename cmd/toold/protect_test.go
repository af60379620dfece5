package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/testpeer"
)

// TestWriteDoesNotBecomeCode is issue 15's first attack against
// examples/commands.yaml as served: write core.fsmonitor into .git/config
// with write_file, then call the read-only git_status. The write is
// refused; and with the setting planted directly (a hostile repository
// unpacked into the workspace), git_status still reports the status
// without running it.
func TestWriteDoesNotBecomeCode(t *testing.T) {
	testpeer.Git(t)
	ws := sharedWorkspace(t)
	marks := t.TempDir()
	// The run-as uid must reach it (t.TempDir's parent is 0700).
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(marks), 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(marks, "pwned")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	git("add", ".")
	git("commit", "-qm", "one")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("two\n"), 0o644)
	if err := exec.Command("chmod", "-R", "a+rX", ws).Run(); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", "../../examples/commands.yaml", "-workspace", ws)

	// The attacker reads the file first, as write_file asks.
	cur, err := os.ReadFile(filepath.Join(ws, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cur)
	hostile := string(cur) + "[core]\n\tfsmonitor = touch " + mark + "\n"
	body, _ := json.Marshal(map[string]any{"path": ".git/config", "content": hostile, "expected_sha256": hex.EncodeToString(sum[:])})
	code, env := in.exec("write_file", string(body))
	e, _ := env["error"].(map[string]any)
	if code != 403 || e["code"] != "protected_path" || !strings.Contains(e["message"].(string), "git") {
		t.Errorf("write_file .git/config: %d %v", code, env)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); strings.Contains(string(b), "fsmonitor") {
		t.Errorf(".git/config was written: %s", b)
	}

	git("config", "core.fsmonitor", "touch "+mark)
	code, env = in.exec("git_status", `{}`)
	res, _ := env["data"].(map[string]any)
	if code != 200 || res["ok"] != true || !strings.Contains(res["stdout"].(string), " M a.txt") {
		t.Errorf("git_status: %d %v", code, env)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("git_status ran the repository's core.fsmonitor")
	}
}

// TestExecutesChecked: -check-config names a command tool's executes
// glob that cannot name a workspace file.
func TestExecutesChecked(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(cfg, []byte("commands:\n  tools:\n    - {name: make_check, description: x, argv: [true], executes: [/etc/passwd]}\n"), 0o644)
	var out, errOut bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	err := run(context.Background(), []string{"-check-config", cfg, "-workspace", dir}, noEnv, nil, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "commands.tools") || !strings.Contains(errOut.String(), "make_check") {
		t.Errorf("err %v, stderr %s", err, errOut.String())
	}
}
