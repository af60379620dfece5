package launch

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestProcessSpeaksAndStops runs a long-lived program in every mode: it
// answers on its standard streams, keeps its stderr tail, sees only the
// allowed environment, and Stop ends its whole tree — also when it ignores
// SIGTERM and left a child behind.
func TestProcessSpeaksAndStops(t *testing.T) {
	t.Setenv("TOOLD_TEST_SECRET", "do-not-pass")
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			l := testLauncher(t, mode, Config{})
			marker := fmt.Sprintf("toold-process-test-%s-%d", mode, time.Now().UnixNano())
			script := `trap '' TERM; echo started >&2; sleep 600 & ` +
				`while read line; do echo "got:$line:${TOOLD_TEST_SECRET:-none}:$MARK"; done`
			p, err := l.Start(ProcessSpec{Argv: []string{"sh", "-c", script},
				Sandbox: Sandbox{Env: map[string]string{"MARK": marker}}})
			if err != nil {
				skipUnavailable(t, err)
				t.Fatal(err)
			}
			if _, err := io.WriteString(p.Stdin, "hello\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(p.Stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if want := "got:hello:none:" + marker + "\n"; line != want {
				t.Errorf("answer %q, want %q", line, want)
			}
			if !eventually(2*time.Second, func() bool { return strings.Contains(p.Stderr(), "started") }) {
				t.Errorf("stderr tail %q", p.Stderr())
			}
			if len(procsWith(marker)) == 0 {
				t.Fatal("the process is not running")
			}
			// stdin closed: the read loop ends, but the shell's trap and
			// its sleeping child keep the tree alive until Stop kills it.
			start := time.Now()
			p.Stop(100 * time.Millisecond)
			select {
			case <-p.Done():
			default:
				t.Fatal("Stop returned before the process exited")
			}
			if !eventually(3*time.Second, func() bool { return len(procsWith(marker)) == 0 }) {
				t.Errorf("processes left after Stop: %v", procsWith(marker))
			}
			t.Logf("stopped in %v", time.Since(start))
			p.Stop(time.Second) // a second Stop does nothing
		})
	}
}

func TestProcessRefusesWhatToolsRefuse(t *testing.T) {
	l := testLauncher(t, ModeNone, Config{})
	for _, tc := range []struct {
		name string
		spec ProcessSpec
		say  string
	}{
		{"no argv", ProcessSpec{}, "no program"},
		{"missing program", ProcessSpec{Argv: []string{"no-such-program-xyz"}}, "no-such-program-xyz"},
		{"cwd outside", ProcessSpec{Argv: []string{"true"}, Dir: "../.."}, "cwd"},
		{"bad containment", ProcessSpec{Argv: []string{"true"}, Sandbox: Sandbox{Containment: "chroot"}}, "containment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Start(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("err = %v, want one saying %q", err, tc.say)
			}
		})
	}
}

// TestStartConcurrently: servers start and restart while toold serves, so
// sandboxes are resolved from many goroutines at once (under -race).
func TestStartConcurrently(t *testing.T) {
	l := testLauncher(t, ModeNone, Config{})
	done := make(chan error, 8)
	for range 8 {
		go func() {
			p, err := l.Start(ProcessSpec{Argv: []string{"true"}, Sandbox: Sandbox{Containment: string(ModeAuto)}})
			if err == nil {
				p.Stop(time.Second)
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
