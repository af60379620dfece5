// Package launchtest holds what the tests of the packages that start
// programs (launch, command, upstream, consult, cmd/toold) share: the skip
// that becomes a failure where a sandbox is required, and the re-run of a
// test binary as an unprivileged uid.
package launchtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireEnv names the variable that makes every sandbox-related skip a
// failure: .ci/run sets it to 1 on its machine (root, bubblewrap, user
// namespaces), where a sandbox test that skips can only mean a broken
// launcher.
const RequireEnv = "TOOLD_REQUIRE_SANDBOX"

// Required says whether RequireEnv is set.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable skips t because this machine lacks what a sandbox test
// needs (a containment mode: errors.Is(err, launch.ErrUnavailable); a tool
// such as setpriv), saying why; with TOOLD_REQUIRE_SANDBOX=1 it fails t
// instead.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s=1, and %s", RequireEnv, why)
	}
	t.Skip(why)
}

// NeedsRoot skips t because a sandbox feature it tests needs toold to be
// root (per-run cgroups, a uid of its own for commands, the minimal root
// built on the launcher thread). Run as root with TOOLD_REQUIRE_SANDBOX=1,
// the feature must be there: t fails instead. As another uid (the
// unprivileged re-run) the skip stands.
func NeedsRoot(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Geteuid() == 0 {
		Unavailable(t, format, args...)
		return
	}
	t.Skipf(format, args...)
}

// Workspace is a fresh workspace the run-as uid (65534, or another
// uid's unprivileged re-run) can reach: t.TempDir is 0700.
func Workspace(t testing.TB) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// RunUnprivileged runs the tests of this test binary that match run again
// as uid (through setpriv), where auto containment means bwrap or an
// unprivileged user namespace and toold can create no cgroup; the child
// keeps TOOLD_REQUIRE_SANDBOX. Each package gives a uid of its own: the
// processes of one uid share a limit (RLIMIT_NPROC), and go test runs
// packages at once. It skips when the test already runs unprivileged or
// under -short.
func RunUnprivileged(t *testing.T, uid int, run string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests are the unprivileged run")
	}
	if testing.Short() {
		t.Skip("-short: the unprivileged run takes a while")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		Unavailable(t, "setpriv is not installed: cannot run the tests as a non-root uid")
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
	id := strconv.Itoa(uid)
	cmd := exec.CommandContext(ctx, setpriv, "--reuid", id, "--regid", id, "--clear-groups",
		copyBin, "-test.run", run, "-test.v", "-test.count", "1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "HOME=" + dir}
	if Required() {
		cmd.Env = append(cmd.Env, RequireEnv+"=1")
	}
	out, err := cmd.CombinedOutput()
	var lines []string
	for line := range strings.Lines(string(out)) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "---") || strings.Contains(l, "_test.go:") {
			lines = append(lines, l)
		}
	}
	t.Logf("as uid %d:\n%s", uid, strings.Join(lines, "\n"))
	if err != nil {
		t.Errorf("the unprivileged run failed: %v\n%s", err, out)
	}
}
