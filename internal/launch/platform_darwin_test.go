package launch

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of macOS's modes. Not run where this was written (no Mac):
// compiled by CI's GOOS=darwin go vet, and run by the macOS job of
// .github/workflows/desktop.yml. They are what a Mac must pass; `toold
// sandbox selftest` tries the same attacks through the built binary.

// TestNoneRunsHere (macOS): an explicit none runs the program in its own
// process group under its rlimits (the shim), and a run past its timeout
// is stopped, its group with it.
func TestNoneRunsHere(t *testing.T) {
	r := runner(t, osLauncher(t), Sandbox{Containment: string(ModeNone), Rlimits: Rlimits{OpenFiles: 77}})
	res, err := r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", `echo "ok $TMPDIR $(ulimit -n)"`}})
	if err != nil || !res.OK || !strings.HasPrefix(res.Stdout, "ok /") || !strings.HasSuffix(res.Stdout, " 77\n") || res.Containment != notIsolated {
		t.Fatalf("%+v, %v", res, err)
	}
	start := time.Now()
	res, err = r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", "sleep 30 & sleep 30"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v, %v after %v", res, err, time.Since(start))
	}
	if res.Limits["descendants"] != groupOnly || !strings.Contains(res.Limits["open_files"], "RLIMIT_NOFILE 77") {
		t.Errorf("limits %v", res.Limits)
	}
}

// TestSeatbeltHolds (macOS): auto is seatbelt; a run reads the workspace
// and writes its TMPDIR, but not a read-only workspace, not .git of a
// writable one (nor a new one), not toold's own files, not the user's
// home, not a hard link to a file outside; a networked run reaches
// another port but not toold's, on any address; no run reaches a unix
// socket it does not list.
func TestSeatbeltHolds(t *testing.T) {
	home, _ := os.UserHomeDir()
	private := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "key"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Private: []string{private}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	own, err := net.Listen("tcp", ":0") // toold's, on every address
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	other, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, ln := range []net.Listener{own, other} {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	sock := filepath.Join("/tmp", "toold-test-"+strconv.Itoa(os.Getpid())+".sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	ownPort, otherPort := strconv.Itoa(own.Addr().(*net.TCPAddr).Port), strconv.Itoa(other.Addr().(*net.TCPAddr).Port)
	if err := l.ProtectPorts(own.Addr().(*net.TCPAddr).Port); err != nil {
		t.Fatal(err)
	}
	ws := l.Workspace()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := func(r *Runner, script string) *Result {
		t.Helper()
		res, err := r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", script}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ro := runner(t, l, Sandbox{})
	if !strings.HasPrefix(ro.Containment(), "seatbelt") {
		t.Fatalf("auto is %q", ro.Containment())
	}
	for script, ok := range map[string]bool{
		"cat in.txt": true,
		`echo x > "$TMPDIR/t" && cat "$TMPDIR/t"`:              true,
		"echo x > out.txt":                                     false,
		"cat " + filepath.Join(private, "key"):                 false,
		"ls " + home:                                           false,
		"nc -z -G 2 127.0.0.1 " + otherPort:                    false,
		"nc -U -z " + sock:                                     false,
		`ln ` + filepath.Join(private, "key") + ` "$TMPDIR/k"`: false,
		`ln /etc/hosts "$TMPDIR/h" && cat "$TMPDIR/h"`:         false,
	} {
		if res := sh(ro, script); res.OK != ok {
			t.Errorf("%s: ok %v, want %v (%s)", script, res.OK, ok, res.Stderr)
		}
	}
	nr := runner(t, l, Sandbox{Network: NetworkOn(), UnixSockets: []string{sock}})
	for script, ok := range map[string]bool{
		"nc -z -G 2 127.0.0.1 " + otherPort:               true,
		"nc -z -G 2 127.0.0.1 " + ownPort:                 false,
		"nc -z -G 2 ::1 " + ownPort:                       false,
		"nc -z -G 2 ::ffff:127.0.0.1 " + ownPort:          false,
		"nc -z -G 2 0.0.0.0 " + ownPort:                   false,
		"nc -z -G 2 $(ipconfig getifaddr en0) " + ownPort: false,
		"nc -U -z " + sock:                                true,
	} {
		if res := sh(nr, script); res.OK != ok {
			t.Errorf("networked: %s: ok %v, want %v (%s)", script, res.OK, ok, res.Stderr)
		}
	}
	rw := runner(t, l, Sandbox{WorkspaceWritable: true})
	for script, ok := range map[string]bool{"echo x > out.txt": true, "echo x > .git/config": false, "echo x > .GIT/hooks": false,
		"mv .git gone": false, "mkdir -p sub/.git": false} {
		if res := sh(rw, script); res.OK != ok {
			t.Errorf("writable: %s: ok %v, want %v (%s)", script, res.OK, ok, res.Stderr)
		}
	}
}

func ptr[T any](v T) *T { return &v }
