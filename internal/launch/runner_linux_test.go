package launch

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunnerRuns: a Runner's run gets the command sandbox in every mode —
// the allowed environment only, stdin, output streamed as it arrives, its
// own timeout stopping a tree that ignores SIGTERM — and a program that is
// not on its PATH is ErrNotFound.
func TestRunnerRuns(t *testing.T) {
	t.Setenv("TOOLD_TEST_SECRET", "do-not-pass")
	t.Setenv("TOOLD_TEST_ALLOWED", "passed")
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			l := testLauncher(t, mode, Config{})
			r, err := l.Runner(Sandbox{EnvAllow: []string{"TOOLD_TEST_ALLOWED"}})
			if err != nil {
				skipUnavailable(t, err)
				t.Fatal(err)
			}
			if !strings.HasPrefix(r.Containment(), string(mode)) {
				t.Errorf("containment %q", r.Containment())
			}
			var mu sync.Mutex
			var chunks []string
			stdin := "question"
			res, err := r.Run(context.Background(), RunSpec{
				Argv:  []string{"sh", "-c", `read q; echo "got:$q:${TOOLD_TEST_SECRET:-none}:$TOOLD_TEST_ALLOWED"; echo oops >&2; exit 3`},
				Stdin: &stdin,
				Emit: func(stream, data string) {
					mu.Lock()
					defer mu.Unlock()
					chunks = append(chunks, stream+"="+data)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != "got:question:none:passed\n" || res.Stderr != "oops\n" || res.ExitCode != 3 || res.OK {
				t.Errorf("result %+v", res)
			}
			mu.Lock()
			got := strings.Join(chunks, "|")
			mu.Unlock()
			if !strings.Contains(got, "stdout=got:question") || !strings.Contains(got, "stderr=oops") {
				t.Errorf("streamed %q", got)
			}

			start := time.Now()
			res, err = r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", `trap '' TERM; sleep 30 & wait`},
				Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.OK || time.Since(start) > 5*time.Second {
				t.Errorf("timeout: %+v after %v", res, time.Since(start))
			}

			_, err = r.Run(context.Background(), RunSpec{Argv: []string{"no-such-program-xyz", "--version"}})
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no-such-program-xyz") {
				t.Errorf("missing program: %v", err)
			}
			if _, err := r.LookPath("sh"); err != nil {
				t.Errorf("LookPath(sh): %v", err)
			}
		})
	}
}

// TestRunnerStopsWithContext: a run whose context ends is stopped and
// answered with an error wrapping the context's.
func TestRunnerStopsWithContext(t *testing.T) {
	l := testLauncher(t, ModeNone, Config{})
	r, err := l.Runner(Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = r.Run(ctx, RunSpec{Argv: []string{"sleep", "30"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if _, err := r.Run(context.Background(), RunSpec{}); err == nil {
		t.Error("an empty argv ran")
	}
	if _, err := l.Runner(Sandbox{Containment: "chroot"}); err == nil {
		t.Error("an unknown containment was accepted")
	}
}

// TestProgramRlimits: a Runner's runs and a started Process have no
// CPU-time or address-space limit unless their Sandbox sets one — the
// section's defaults do not apply to them — and keep the other limits.
func TestProgramRlimits(t *testing.T) {
	l := testLauncher(t, ModeNone, Config{Rlimits: Rlimits{CPU: 7 * time.Second, AddressSpace: 256 << 20}})
	const script = `ulimit -t; ulimit -v; ulimit -n`
	for _, tc := range []struct {
		sb   Sandbox
		want string
	}{
		{Sandbox{}, "unlimited\nunlimited\n1024\n"},
		{Sandbox{Rlimits: Rlimits{CPU: 5 * time.Second, AddressSpace: 1 << 30}}, "5\n1048576\n1024\n"},
	} {
		r, err := l.Runner(tc.sb)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", script}})
		if err != nil || res.Stdout != tc.want {
			t.Errorf("Runner(%+v): %q %v, want %q", tc.sb.Rlimits, res.Stdout, err, tc.want)
		}
		p, err := l.Start(ProcessSpec{Argv: []string{"sh", "-c", script}, Sandbox: tc.sb})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout)
		p.Stop(time.Second)
		if string(out) != tc.want {
			t.Errorf("Start(%+v): %q, want %q", tc.sb.Rlimits, out, tc.want)
		}
	}
}
