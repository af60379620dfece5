package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/launch/launchtest"
	"github.com/toold/toold/internal/tools/command"
)

// TestForkBombWhileServing runs a fork bomb through toold itself and polls
// its /healthz all the while: the process limit contains the bomb, toold
// keeps answering, and nothing of the bomb is left running afterwards.
func TestForkBombWhileServing(t *testing.T) {
	const bombUID = 64999
	if os.Getuid() != 0 {
		launchtest.NeedsRoot(t, "needs root: the process limit holds only under a dedicated uid, which only root can switch to")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bomb.yaml")
	os.WriteFile(cfg, []byte(`
commands:
  containment: auto
  run_as: {uid: 64999, gid: 64999}
  rlimits: {processes: 64}
  tools:
    - name: bomb
      description: A fork bomb, for the test.
      # One fork for the bomb, then exec: a forked sleep would race the
      # bomb for the last process slot and could end the call early.
      argv: [sh, -c, "b() { b | b & }; b & exec sleep 30"]
      sandbox: {limits: {timeout: 3s, max: 2s, target: 1s}}
`), 0o644)
	in := start(t, nil, "-config", cfg, "-workspace", sharedWorkspace(t))
	var answered, failed, slowest atomic.Int64
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		client := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			t0 := time.Now()
			resp, err := client.Get(in.url + "/healthz")
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
				continue
			}
			resp.Body.Close()
			answered.Add(1)
			slowest.Store(max(slowest.Load(), int64(time.Since(t0))))
		}
	}()
	code, env := in.exec("bomb", `{}`)
	close(stop)
	<-polled
	if code != 504 || env["status"] != "timeout" {
		t.Errorf("the bomb's call: %d %v", code, env)
	}
	if failed.Load() > 0 || answered.Load() < 100 {
		t.Errorf("/healthz during the bomb: %d answered, %d failed", answered.Load(), failed.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	// A uid of its own: other packages' tests run commands as 65534 at the
	// same time, and their processes are not the bomb's.
	for len(liveProcsOfUID(bombUID)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the bomb still run: %v", liveProcsOfUID(bombUID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("/healthz answered %d times during the bomb, slowest %v", answered.Load(), time.Duration(slowest.Load()))
}

// liveProcsOfUID lists the processes of uid that are not zombies (a zombie
// runs nothing; the host's init reaps it in its own time).
func liveProcsOfUID(uid int) []string {
	var pids []string
	want := "Uid:\t" + strconv.Itoa(uid) + "\t"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err == nil && strings.Contains(string(b), want) && !strings.Contains(string(b), "State:\tZ") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// BenchmarkTrueThroughStack runs /bin/true as a command tool through the
// whole stack (HTTP, pipeline, containment) in each containment mode this
// machine provides, beside a bare os/exec of /bin/true in the same run.
func BenchmarkTrueThroughStack(b *testing.B) {
	b.Run("bare-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []string{"none", "namespaces", "bwrap"} {
		b.Run(mode, func(b *testing.B) {
			url := trueServer(b, mode)
			for b.Loop() {
				resp, err := http.Post(url+"/tools/true/execute", "application/json", nil)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// trueServer serves a /bin/true tool with the given containment on
// loopback, or skips when this machine cannot provide it.
func trueServer(b *testing.B, mode string) string {
	b.Helper()
	cfg := config.Default()
	cfg.Workspace = sharedWorkspace(b)
	cfg.Commands.Containment = mode
	cfg.Commands.Rlimits.Processes = -1 // bwrap leaves zombies for PID 1; a tight uid limit would fill
	cfg.Commands.Tools = append(cfg.Commands.Tools, trueTool())
	a, err := build(cfg, zap.NewNop(), func(string) (string, bool) { return "", false }, false)
	if err != nil {
		launchtest.Unavailable(b, "containment %s is not available here: %v", mode, err)
	}
	b.Cleanup(a.close)
	srv := httptest.NewServer(a.srv.Handler())
	b.Cleanup(srv.Close)
	return srv.URL
}

func trueTool() command.ToolConfig {
	return command.ToolConfig{Name: "true", Description: "Runs /bin/true.", Argv: []command.Arg{{Arg: "/bin/true"}}}
}

// sharedWorkspace is a workspace the unprivileged uid commands run as can
// enter: t.TempDir's parent is private to toold's user.
func sharedWorkspace(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "toold-ws-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}
