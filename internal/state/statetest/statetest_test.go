package statetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartReady: a server that starts is ready; one that cannot start
// is an error holding what it said, not a 20-second wait.
func TestStartReady(t *testing.T) {
	bin, err := ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	ok := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(FreePort(t)), "-js", "-sd", t.TempDir())
	t.Cleanup(func() {
		if ok.Process != nil {
			_ = ok.Process.Kill()
			_ = ok.Wait()
		}
	})
	if err := StartReady(ok); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.conf")
	bad := exec.Command(bin, "-c", missing)
	err = StartReady(bad)
	_ = bad.Wait()
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("a server on a missing config: %v", err)
	}
}

// TestServerBinaryCached: nats-server is kept in one place per version,
// reused rather than rebuilt, with no build directory left beside it.
func TestServerBinaryCached(t *testing.T) {
	bin, err := ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cachedServer()
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != bin || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("a second lookup gave %s (%v), want the cached %s (%v)", again, after.ModTime(), bin, before.ModTime())
	}
	version, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(version)); !strings.Contains(filepath.Base(bin), "-"+v+"-") {
		t.Errorf("%s does not name the nats-server version %s", bin, v)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), ".build-*"))
	for _, d := range left {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > 10*time.Minute {
			t.Errorf("a build directory was left behind: %s", d)
		}
	}
}
