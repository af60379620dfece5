package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toold/toold/internal/launch/launchtest"
)

// The adversarial suite: real commands, each asserting the figure the
// issue sets, in every containment mode this machine provides.

// marked is a sandbox whose processes carry marker in their environment.
func marked(marker string) Sandbox {
	return Sandbox{Env: map[string]string{"TOOLD_TEST_MARKER": marker}}
}

// assertGone fails when a process carrying marker is alive 1s later.
func assertGone(t *testing.T, marker string) {
	t.Helper()
	if !eventually(time.Second, func() bool { return len(procsWith(marker)) == 0 }) {
		t.Errorf("processes of the command survive: %v", procsWith(marker))
	}
}

// bombScript forks without end. Its shell forks once, for the bomb, and
// then execs the sleep that holds the call till its deadline: a shell that
// forked the sleep instead would race the bomb for the last process slot,
// lose on a busy machine ("Cannot fork") and end the call early.
const bombScript = "b() { b | b & }; b & exec sleep 30"

func TestForkBombIsContained(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			marker := fmt.Sprintf("bomb-%s-%d", m, time.Now().UnixNano())
			const limit = 64
			sbc := marked(marker)
			sbc.Rlimits.Processes = limit
			// A uid of its own, which the peak below counts: other packages'
			// tests run commands as 65534, and another run of this test
			// binary at the same time (two engineers on one machine) has
			// a uid of its own too.
			uid := 60000 + os.Getpid()%4000
			r := sandboxed(t, m, Config{RunAs: RunAs{UID: &uid, GID: &uid}}, sbc)
			sb := r.sb
			if !sb.procs || !sb.drop {
				launchtest.NeedsRoot(t, "containment %s has no dedicated uid here: a process-count limit cannot hold", m)
			}
			// Killed processes stay zombies until the host's init reaps them,
			// and count against the limit till then: start from none.
			if !eventually(10*time.Second, func() bool { return len(procsOfUID(sb.uid)) == 0 }) {
				t.Fatalf("uid %d still has processes: %v", sb.uid, procsOfUID(sb.uid))
			}
			health := serveHealth(t)
			stop := make(chan struct{})
			var peak atomic.Int64
			var wg sync.WaitGroup
			wg.Go(func() { health.poll(stop) })
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
						peak.Store(max(peak.Load(), int64(len(procsOfUID(sb.uid)))))
					}
				}
			})
			res, err := runFor(t, r, 3*time.Second, "sh", "-c", bombScript)
			close(stop)
			wg.Wait()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the deadline; result %+v", err, res)
			}
			// Zombies included; the bwrap outer process and its init count too.
			if p := peak.Load(); p > limit {
				t.Errorf("the bomb reached %d processes; limit %d", p, limit)
			}
			health.check(t)
			assertGone(t, marker)
			t.Logf("peak processes %d (limit %d); /healthz %d answers, slowest %v", peak.Load(), limit, health.n.Load(), time.Duration(health.slowest.Load()))
		})
	}
}

// health is an HTTP server in this process, polled while a command runs:
// toold's own serving must not suffer from what the command does.
type health struct {
	url      string
	n        atomic.Int64
	failures atomic.Int64
	slowest  atomic.Int64
}

func serveHealth(t *testing.T) *health {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &health{url: "http://" + ln.Addr().String() + "/healthz"}
}

func (h *health) poll(stop <-chan struct{}) {
	c := &http.Client{Timeout: 2 * time.Second}
	for i := 0; i < 1000; i++ {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		start := time.Now()
		resp, err := c.Get(h.url)
		if err != nil || resp.StatusCode != http.StatusOK {
			h.failures.Add(1)
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		h.n.Add(1)
		h.slowest.Store(max(h.slowest.Load(), int64(time.Since(start))))
	}
}

func (h *health) check(t *testing.T) {
	t.Helper()
	if h.n.Load() == 0 || h.failures.Load() > 0 || time.Duration(h.slowest.Load()) > time.Second {
		t.Errorf("/healthz: %d answers, %d failures, slowest %v", h.n.Load(), h.failures.Load(), time.Duration(h.slowest.Load()))
	}
}

func TestOutputCapStopsProducer(t *testing.T) {
	const limit = 1 << 20
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			marker := fmt.Sprintf("yes-%s-%d", m, time.Now().UnixNano())
			r := sandboxed(t, m, Config{MaxOutputBytes: limit}, marked(marker))
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			var peak atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					peak.Store(max(peak.Load(), ms.HeapAlloc))
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, st, err := r.run(ctx, RunSpec{Argv: []string{"yes", "y"}})
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			growth := int64(peak.Load()) - int64(base.HeapAlloc)
			stopped := st.exited.Sub(st.capHit)
			t.Logf("cap hit → producer reaped in %v; heap growth %d bytes (cap %d)", stopped, growth, limit)
			if diff := cmp.Diff([]string{"stdout"}, res.TruncatedStreams); diff != "" || !res.Truncated || len(res.Stdout) != limit {
				t.Errorf("truncated %v %s, %d bytes kept", res.Truncated, diff, len(res.Stdout))
			}
			if st.capHit.IsZero() || stopped > 100*time.Millisecond {
				t.Errorf("the producer was stopped %v after the cap, want ≤ 100ms", stopped)
			}
			if growth > 2*limit {
				t.Errorf("heap grew by %d bytes, want < %d", growth, 2*limit)
			}
			assertGone(t, marker)
		})
	}
}

func TestTimeoutKillsTheTree(t *testing.T) {
	commands := map[string][]string{
		"sleep":  {"sleep", "3600"},
		"setsid": {"sh", "-c", "setsid sleep 999 & sleep 999"},
	}
	for _, m := range modes {
		for name, argv := range commands {
			t.Run(string(m)+"/"+name, func(t *testing.T) {
				marker := fmt.Sprintf("timeout-%s-%s-%d", m, name, time.Now().UnixNano())
				r := sandboxed(t, m, Config{}, marked(marker))
				const deadline = time.Second
				start := time.Now()
				_, err := runFor(t, r, deadline, argv...)
				took := time.Since(start)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want the deadline", err)
				}
				if took < deadline || took > deadline+time.Second {
					t.Errorf("returned after %v, want within [%v, %v]", took, deadline, deadline+time.Second)
				}
				assertGone(t, marker)
				t.Logf("returned %v after the call started (deadline %v)", took, deadline)
			})
		}
	}
}

func TestResourceLimits(t *testing.T) {
	cases := []struct {
		name  string
		argv  []string
		lim   Rlimits
		check func(t *testing.T, r *Result)
	}{
		{"memory hog", []string{"awk", `BEGIN { s = "a"; while (length(s) < 2^31) s = s s; print "survived" }`}, Rlimits{},
			func(t *testing.T, r *Result) {
				if r.OK || strings.Contains(r.Stdout, "survived") {
					t.Errorf("the hog was not stopped by the address-space limit: %+v", r)
				}
			}},
		{"file size", []string{"sh", "-c", `head -c 2G /dev/zero > "$TMPDIR/f"; echo "rc=$?"; wc -c < "$TMPDIR/f"`}, Rlimits{},
			func(t *testing.T, r *Result) {
				want := "rc=153\n10485760\n" // 128 + SIGXFSZ; exactly the 10 MiB limit written
				if diff := cmp.Diff(want, r.Stdout); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
			}},
		{"cpu", []string{"sh", "-c", "while :; do :; done"}, Rlimits{CPU: time.Second},
			func(t *testing.T, r *Result) {
				if r.OK || (r.Signal != "SIGXCPU" && r.Signal != "SIGKILL" && r.ExitCode != 128+24) {
					t.Errorf("the spinner was not stopped by the CPU limit: %+v", r)
				}
			}},
		{"visible limits", []string{"sh", "-c", "ulimit -n; ulimit -v; ulimit -f; ulimit -t"}, Rlimits{},
			func(t *testing.T, r *Result) {
				if diff := cmp.Diff("1024\n524288\n20480\n30\n", r.Stdout); diff != "" {
					t.Errorf("limits (-want +got):\n%s", diff)
				}
			}},
	}
	for _, m := range modes {
		for _, c := range cases {
			t.Run(string(m)+"/"+c.name, func(t *testing.T) {
				r := sandboxed(t, m, Config{}, Sandbox{Rlimits: c.lim})
				res, err := runFor(t, r, 20*time.Second, c.argv...)
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, res)
			})
		}
	}
}

func TestSecretEnvironmentIsInvisible(t *testing.T) {
	secret := fmt.Sprintf("hunter2-%d", time.Now().UnixNano())
	t.Setenv("TOOLD_TEST_SECRET", secret)
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			sh := sandboxed(t, m, Config{}, Sandbox{EnvAllow: []string{"LANG"}})
			r, err := runFor(t, sh, 10*time.Second, "sh", "-c", fmt.Sprintf("env; cat /proc/%d/environ; cat /proc/1/environ", os.Getpid()))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(r.Stdout+r.Stderr, secret) || !strings.Contains(r.Stdout, "TMPDIR=") {
				t.Errorf("the command's view of the environment:\n%s\n%s", r.Stdout, r.Stderr)
			}
		})
	}
}

func TestNetworkOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	targets := map[string]string{"loopback": fmt.Sprintf("127.0.0.1/%d", port), "public": "192.0.2.1/80"}
	for _, m := range modes {
		for name, target := range targets {
			t.Run(string(m)+"/"+name, func(t *testing.T) {
				if m == ModeNone {
					t.Skip("containment none cannot take the network away (documented); namespaces and bwrap do")
				}
				sh := sandboxed(t, m, Config{}, Sandbox{})
				start := time.Now()
				r, err := runFor(t, sh, 10*time.Second, "bash", "-c", "exec 3<>/dev/tcp/"+target+" && echo connected")
				if err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); r.OK || strings.Contains(r.Stdout, "connected") || took > time.Second {
					t.Errorf("connecting to %s: %+v after %v", target, r, took)
				}
				t.Logf("%s: %s (%v ms)", target, strings.TrimSpace(r.Stderr), r.DurationMS)
			})
		}
	}
	if n := accepted.Load(); n > 0 {
		t.Errorf("the listener accepted %d connections", n)
	}
}

// TestPrivateTempDirRemoved: each run has its own TMPDIR, which is gone
// when the call returns, whatever the command left in it.
func TestPrivateTempDirRemoved(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			sh := sandboxed(t, m, Config{}, Sandbox{})
			r, err := runFor(t, sh, 10*time.Second, "sh", "-c", `echo x > "$TMPDIR/left"; printf %s "$TMPDIR"`)
			if err != nil {
				t.Fatal(err)
			}
			if dir := strings.TrimSpace(r.Stdout); !strings.HasPrefix(dir, "/") || r.ExitCode != 0 {
				t.Fatalf("the command could not use its TMPDIR %q: %+v", dir, r)
			}
			// The host side of every run's directory lives under the
			// launcher's base, whatever path the sandbox shows the command.
			if left, _ := os.ReadDir(sh.l.tmpBase); len(left) != 0 {
				t.Errorf("%d run directories left under %s", len(left), sh.l.tmpBase)
			}
		})
	}
}
