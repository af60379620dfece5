package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/config"
)

// runBriefly runs toold with args and env until it listens (then stops
// it) or exits, and returns what it printed and whether it started.
func runBriefly(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, started bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	args = append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "off"}, args...)
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, lookup, strings.NewReader(""), out, errOut) }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			return out.String(), errOut.String(), false
		case <-deadline:
			t.Fatalf("toold neither started nor stopped: %s %s", out, errOut)
		case <-time.After(5 * time.Millisecond):
		}
		if listenLine.MatchString(out.String()) {
			cancel()
			<-done
			return out.String(), errOut.String(), true
		}
	}
}

// TestOwnFilesOutsideTheWorkspace (issue 24, finding 4): toold refuses to
// start when its state directory, audit signing key, checkpoint file or
// configuration file lies inside the workspace it serves — where
// write_file replaced the audit key and edit_file the configuration — and
// names each; it starts with them outside.
func TestOwnFilesOutsideTheWorkspace(t *testing.T) {
	key := strings.Repeat("c3", 32)
	write := func(path, body string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		name    string
		args    func(ws, out string) []string
		setting string
	}{
		{"state directory", func(ws, out string) []string { return []string{"-state-dir", filepath.Join(ws, ".toold")} }, "state.dir"},
		{"state directory is the workspace", func(ws, out string) []string { return []string{"-state-dir", ws} }, "state.dir"},
		{"audit signing key", func(ws, out string) []string {
			cfg := write(filepath.Join(out, "toold.yaml"), "state: {audit: {signing_key_file: "+write(filepath.Join(ws, "audit.key"), key)+"}}\n")
			return []string{"-config", cfg, "-state-dir", filepath.Join(out, "state")}
		}, "state.audit.signing_key_file"},
		{"checkpoint file", func(ws, out string) []string {
			cfg := write(filepath.Join(out, "toold.yaml"), "state: {audit: {checkpoint_file: "+filepath.Join(ws, "checkpoints.jsonl")+"}}\n")
			return []string{"-config", cfg, "-state-dir", filepath.Join(out, "state")}
		}, "state.audit.checkpoint_file"},
		{"policy file", func(ws, out string) []string {
			pol := write(filepath.Join(ws, "policies.cedar"), "permit (principal, action, resource);\n")
			cfg := write(filepath.Join(out, "toold.yaml"), "policy: {files: ["+pol+"]}\n")
			return []string{"-config", cfg, "-state-dir", filepath.Join(out, "state")}
		}, "policy.files[0]"},
		{"configuration file", func(ws, out string) []string {
			return []string{"-config", write(filepath.Join(ws, "examples", "toold.yaml"), "log_level: warn\n"), "-state-dir", filepath.Join(out, "state")}
		}, "-config"},
		{"through a symlink to the workspace", func(ws, out string) []string {
			link := filepath.Join(out, "link")
			if err := os.Symlink(ws, link); err != nil {
				t.Fatal(err)
			}
			return []string{"-state-dir", filepath.Join(link, "state")}
		}, "state.dir"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, out := workspace(t), t.TempDir()
			args := append([]string{"-workspace", ws}, c.args(ws, out)...)
			stdout, stderr, started := runBriefly(t, nil, args...)
			if started || !strings.Contains(stderr, c.setting+" (") || !strings.Contains(stderr, "inside the workspace") {
				t.Fatalf("started %v with %v\nstdout: %s\nstderr: %s", started, args, stdout, stderr)
			}
		})
	}
	t.Run("outside", func(t *testing.T) {
		ws, out := workspace(t), t.TempDir()
		cfg := write(filepath.Join(out, "toold.yaml"), "state: {audit: {signing_key_file: "+write(filepath.Join(out, "audit.key"), key)+"}}\n")
		if stdout, stderr, started := runBriefly(t, nil, "-workspace", ws, "-config", cfg, "-state-dir", filepath.Join(out, "state")); !started {
			t.Fatalf("toold did not start with its files outside the workspace:\n%s\n%s", stdout, stderr)
		}
	})
}

// TestWideWorkspaceWarns (issue 24, finding 4): over HTTP, a workspace
// that is the home directory, or holds it, is served with a warning at
// every start, as -stdio refuses it unless it was given.
func TestWideWorkspaceWarns(t *testing.T) {
	home := workspace(t)
	for _, c := range []struct{ name, ws, want string }{
		{"home", home, "WARNING: the workspace is your home directory"},
		{"above home", filepath.Dir(home), "which holds your home directory"},
		{"a project", filepath.Join(home, "project"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.MkdirAll(c.ws, 0o755)
			stdout, stderr, started := runBriefly(t, map[string]string{"HOME": home}, "-workspace", c.ws, "-state-dir", t.TempDir())
			if !started {
				t.Fatalf("toold did not start: %s %s", stdout, stderr)
			}
			if c.want == "" && strings.Contains(stdout, "WARNING") || c.want != "" && !strings.Contains(stdout, c.want) {
				t.Errorf("stdout, want %q:\n%s", c.want, stdout)
			}
		})
	}
}

// TestPrivatePathsReachTheLauncher: toold's own files — the config, the
// state directory, the audit key — are what the launcher keeps every run
// from (launch.Config.Private: denied by macOS's Seatbelt profile,
// labelled unreadable to Windows's low-integrity runs), absolute.
func TestPrivatePathsReachTheLauncher(t *testing.T) {
	out := t.TempDir()
	cfg := config.Default()
	cfg.State.Dir = filepath.Join(out, "state")
	cfg.State.Audit.SigningKeyFile = "audit.key"
	got := privatePaths(cfg, filepath.Join(out, "toold.yaml"), true)
	abs, _ := filepath.Abs("audit.key")
	want := []string{filepath.Join(out, "toold.yaml"), filepath.Join(out, "state"), abs}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("private paths %q, want %q", got, want)
	}
	if got := privatePaths(cfg, "", false); len(got) != 0 {
		t.Errorf("without a config file or the store: %q", got)
	}
}
