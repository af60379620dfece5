package statetest

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
