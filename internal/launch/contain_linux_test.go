package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// Issue 15, findings 2–4: containment that holds, per call. Each test runs
// in every mode this machine provides; TestUnprivileged runs them again as
// a non-root uid.

// TestAutoNeverFallsBackToNone: without a sandbox, auto refuses and names
// the explicit way out; an explicit none says so in every result.
func TestAutoNeverFallsBackToNone(t *testing.T) {
	h := &host{root: false, workspace: t.TempDir(), launchers: map[Mode]*launcher{},
		nsErr: errors.New("user namespaces are disabled"), bwrapErr: errors.New("bubblewrap is not installed")}
	mode, _, l, err := h.resolve(ModeAuto)
	if l != nil {
		l.close()
	}
	var nse *noSandboxError
	if !errors.As(err, &nse) || !strings.Contains(err.Error(), "`containment: none`") || mode != "" {
		t.Fatalf("auto without a sandbox: mode %q, err %v; want a refusal naming `containment: none`", mode, err)
	}
	for _, m := range []Mode{ModeAuto, ModeNone} {
		t.Run(string(m), func(t *testing.T) {
			sh := sandboxed(t, m, Config{}, Sandbox{})
			r, err := runFor(t, sh, 10*time.Second, "true")
			if err != nil {
				t.Fatal(err)
			}
			if sh.sb.mode == ModeNone && m == ModeAuto {
				t.Errorf("auto resolved to none")
			}
			if (r.Containment == notIsolated) != (m == ModeNone) || r.Containment == "" {
				t.Errorf("containment %q in the result of %s", r.Containment, m)
			}
			if m == ModeNone && !strings.HasPrefix(sh.Containment(), notIsolated) {
				t.Errorf("discovery says %q", sh.Containment())
			}
			if r.Limits["descendants"] == "" || r.Limits["memory"] == "" {
				t.Errorf("limits not reported: %v", r.Limits)
			}
		})
	}
}

// TestDescendantsGoneWhenRunEnds: a daemon that leaves the process group,
// clears its environment and lets go of the pipes is gone when the call
// returns (issue: it outlived the call under none).
func TestDescendantsGoneWhenRunEnds(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			secs := 900000 + time.Now().UnixNano()%90000
			script := fmt.Sprintf(`setsid env -i sleep %d </dev/null >/dev/null 2>&1 & echo started`, secs)
			sh := sandboxed(t, m, Config{}, Sandbox{})
			if m == ModeNone && !sh.sb.cg.usable() {
				launchtest.NeedsRoot(t, "containment none without cgroups (not root, no delegated subtree): a process that clears its environment and calls setsid escapes; documented (%s)", sh.sb.cg.reason)
			}
			r, err := runFor(t, sh, 10*time.Second, "sh", "-c", script)
			if err != nil || !r.OK {
				t.Fatalf("%+v %v", r, err)
			}
			// A PID namespace ends with its init, which bwrap's outer
			// process may report a moment before; a cgroup is waited for.
			marker := fmt.Sprintf("sleep\x00%d", secs)
			if !eventually(time.Second, func() bool { return len(procsWith(marker)) == 0 }) {
				left := procsWith(marker)
				for _, p := range left {
					if pid, err := strconv.Atoi(p); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				t.Fatalf("the daemon outlived the call: pids %v (descendants: %s)", left, r.Limits["descendants"])
			}
		})
	}
}

// TestMinimalRoot: under namespaces the command sees no host file but the
// system directories, a few of /etc and the workspace; no host unix socket;
// and what it leaves in /tmp, /var/tmp and /dev/shm goes with the run.
func TestMinimalRoot(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			if m == ModeNone {
				t.Skip("containment none shares the host's file system (documented): nothing to check")
			}
			secretDir := t.TempDir()
			_ = os.Chmod(secretDir, 0o755)
			cfgFile := filepath.Join(secretDir, "toold.yaml")
			if err := os.WriteFile(cfgFile, []byte("confirm_secret: s3cr3t-i15\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(secretDir, "host.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			_ = os.Chmod(sock, 0o777)
			accepted := make(chan struct{}, 1)
			go func() {
				if c, err := ln.Accept(); err == nil {
					accepted <- struct{}{}
					_ = c.Close()
				}
			}()
			mark := fmt.Sprintf("i15-left-%d", time.Now().UnixNano())
			script := fmt.Sprintf(`cat %s; `+
				`perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die; connect($s, pack_sockaddr_un("%s")) or die "connect: $!\n"; print "connected\n"'; `+
				`for d in /tmp /var/tmp /dev/shm; do echo x > $d/%s && echo "wrote $d"; done; ls /run /home /root 2>&1 | head -3; true`,
				cfgFile, sock, mark)
			sh := sandboxed(t, m, Config{}, Sandbox{})
			r, err := runFor(t, sh, 10*time.Second, "sh", "-c", script)
			if err != nil {
				t.Fatal(err)
			}
			out := r.Stdout + r.Stderr
			t.Logf("%s: %s", m, out)
			if strings.Contains(out, "s3cr3t-i15") {
				t.Errorf("the command read a host file outside the workspace")
			}
			select {
			case <-accepted:
				t.Errorf("the command connected to a host unix socket")
			default:
				if strings.Contains(out, "connected\n") {
					t.Errorf("the command connected to a host unix socket")
				}
			}
			for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
				if _, err := os.Stat(filepath.Join(d, mark)); err == nil {
					_ = os.Remove(filepath.Join(d, mark))
					t.Errorf("a file the command wrote in %s outlived the call", d)
				}
			}
		})
	}
}

// TestLimitsPerRun: memory, processes and /tmp are bounded per call, not
// per process or per uid.
func TestLimitsPerRun(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		// Four processes of 120 MiB each in a run of 300 MiB: each is far
		// below the address-space limit (512 MiB), together they are not.
		script := `for i in 1 2 3 4; do perl -e '$x = "x" x (120<<20); sleep 2; print "alive\n"' & done; wait`
		for _, m := range modes {
			t.Run(string(m), func(t *testing.T) {
				sh := sandboxed(t, m, Config{}, Sandbox{Rlimits: Rlimits{Memory: 300 << 20}})
				needCgroup(t, sh, "memory")
				r, err := runFor(t, sh, 20*time.Second, "sh", "-c", script)
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(r.Stdout, "alive"); n == 4 {
					t.Errorf("four processes held 480 MiB in a run limited to 300 MiB: %+v", r)
				}
				if !strings.Contains(r.Limits["memory"], "cgroup") {
					t.Errorf("limits say %q", r.Limits["memory"])
				}
			})
		}
	})
	t.Run("processes", func(t *testing.T) {
		// A run fills its process limit; another run of the same uid
		// still forks (issue: "fork: retry: Resource temporarily
		// unavailable" in the other caller's command).
		for _, m := range modes {
			t.Run(string(m), func(t *testing.T) {
				uid := 64997
				sh := sandboxed(t, m, Config{RunAs: RunAs{UID: &uid, GID: &uid}}, Sandbox{Rlimits: Rlimits{Processes: 20}})
				if sb := sh.sb; !sb.pidsByCgroup() {
					launchtest.NeedsRoot(t, "containment %s: no pids cgroup toold can make here (%s), so the process limit, where there is one, is the uid's RLIMIT_NPROC, shared by concurrent runs (documented)", m, sb.cg.reason)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var wg sync.WaitGroup
				wg.Go(func() {
					_, _ = sh.Run(ctx, RunSpec{Argv: []string{"bash", "-c", `i=0; while [ $i -lt 60 ]; do sleep 5 & i=$((i+1)); done 2>/dev/null; echo full; wait`}})
				})
				time.Sleep(1500 * time.Millisecond) // the hog is at its limit
				r, err := runFor(t, sh, 10*time.Second, "sh", "-c", `for i in 1 2 3 4 5; do /bin/true || exit 1; done; echo forked`)
				cancel()
				wg.Wait()
				if err != nil || !strings.Contains(r.Stdout, "forked") {
					t.Errorf("another run could not fork while one run was at its limit: %+v %v", r, err)
				}
			})
		}
	})
	t.Run("tmp", func(t *testing.T) {
		for _, m := range modes {
			t.Run(string(m), func(t *testing.T) {
				sh := sandboxed(t, m, Config{}, Sandbox{Rlimits: Rlimits{FileSize: -1, TmpSize: 32 << 20}})
				if !sh.sb.tmpfsTmp() {
					t.Skipf("containment %s: TMPDIR is a host directory, not size-capped (documented; file size is limited per process)", m)
				}
				r, err := runFor(t, sh, 20*time.Second, "sh", "-c", `head -c 100m /dev/zero > "$TMPDIR/big"; echo "rc=$?"; wc -c < "$TMPDIR/big"`)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(r.Stdout, "rc=0") || !strings.Contains(r.Stdout, "33554432") {
					t.Errorf("TMPDIR took 100 MiB with a 32 MiB cap: %+v", r)
				}
			})
		}
	})
}

func needCgroup(t *testing.T, r *Runner, ctl string) {
	t.Helper()
	sb := r.sb
	if _, ok := sb.cg.has(ctl); !ok {
		launchtest.NeedsRoot(t, "no %s cgroup toold can create here (%s): the limit is per process only", ctl, sb.cg.reason)
	}
}

// TestLaunchersKeepTheirOwnCgroups: two Launchers in one process (tests
// build many, and toold could build more than one) each have a cgroup
// parent of their own, so closing one leaves the other's runs their
// cgroups. They used to share toold-<pid>, which the first to close
// removed; and a stale toold-<pid> of a dead toold whose pid came round
// again was taken for this one's.
func TestLaunchersKeepTheirOwnCgroups(t *testing.T) {
	a := sandboxed(t, ModeNamespaces, Config{}, Sandbox{})
	b := sandboxed(t, ModeNamespaces, Config{}, Sandbox{})
	needCgroup(t, b, "memory")
	if a.l.host.cg.v2 != "" && a.l.host.cg.v2 == b.l.host.cg.v2 {
		t.Fatalf("both Launchers use %s", a.l.host.cg.v2)
	}
	if err := a.l.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := runFor(t, b, 10*time.Second, "true")
	if err != nil || !strings.Contains(r.Limits["memory"], "cgroup") {
		t.Fatalf("after the other Launcher closed: %+v, %v", r, err)
	}
}

// TestUnavailableIsTyped: a mode this machine cannot provide is
// ErrUnavailable, which tests skip on (and CI, with TOOLD_REQUIRE_SANDBOX,
// fails on); a configuration mistake is not, so it can never pass as a
// missing sandbox.
func TestUnavailableIsTyped(t *testing.T) {
	l := testLauncher(t, ModeNone, Config{Bwrap: "/nonexistent/bwrap"})
	for _, tc := range []struct {
		name        string
		sb          Sandbox
		unavailable bool
	}{
		{"bwrap not installed", Sandbox{Containment: string(ModeBwrap)}, true},
		{"unknown mode", Sandbox{Containment: "chroot"}, false},
		{"relative read-only path", Sandbox{Containment: string(ModeNone), ReadOnlyPaths: []string{"opt"}}, false},
	} {
		_, err := l.CommandRunner(tc.sb)
		if err == nil || errors.Is(err, ErrUnavailable) != tc.unavailable {
			t.Errorf("%s: %v, want unavailable %v", tc.name, err, tc.unavailable)
		}
	}
}
