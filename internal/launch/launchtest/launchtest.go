// Package launchtest holds what the tests of the packages that start
// programs (launch, command, upstream, consult, cmd/toold) share.
package launchtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RunUnprivileged runs the tests of this test binary that match run again
// as uid 65534 (through setpriv), where auto containment means bwrap or an
// unprivileged user namespace and toold can create no cgroup. It skips when
// the test already runs unprivileged, under -short, or without setpriv.
func RunUnprivileged(t *testing.T, run string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests are the unprivileged run")
	}
	if testing.Short() {
		t.Skip("-short: the unprivileged run takes a while")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed: cannot run the tests as a non-root uid")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The build cache is root's alone: a copy uid 65534 can execute.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	copyBin := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(copyBin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
		copyBin, "-test.run", run, "-test.v", "-test.count", "1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	var lines []string
	for line := range strings.Lines(string(out)) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "---") || strings.Contains(l, "_test.go:") {
			lines = append(lines, l)
		}
	}
	t.Logf("as uid 65534:\n%s", strings.Join(lines, "\n"))
	if err != nil {
		t.Errorf("the unprivileged run failed: %v\n%s", err, out)
	}
}
