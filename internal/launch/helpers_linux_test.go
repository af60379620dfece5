package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// modes are the containment modes the tests of every mode run under.
var modes = []Mode{ModeNone, ModeNamespaces, ModeBwrap}

// testLauncher builds a Launcher whose default is mode over a fresh
// workspace the run-as uid can reach.
func testLauncher(t testing.TB, mode Mode, cfg Config) *Launcher {
	t.Helper()
	cfg.Containment = string(mode)
	l, err := New(cfg, launchtest.Workspace(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// sandboxed resolves sb as a command tool's on a new Launcher in mode,
// skipping the test with the reason when this machine cannot provide the
// mode.
func sandboxed(t testing.TB, mode Mode, cfg Config, sb Sandbox) *Runner {
	t.Helper()
	return commandRunner(t, testLauncher(t, mode, cfg), sb)
}

// commandRunner resolves sb as a command tool's on l, skipping the test
// when this machine cannot provide its mode (failing it where a sandbox is
// required: launchtest.Unavailable).
func commandRunner(t testing.TB, l *Launcher, sb Sandbox) *Runner {
	t.Helper()
	r, err := l.CommandRunner(sb)
	if err != nil {
		skipUnavailable(t, err)
		t.Fatal(err)
	}
	return r
}

// skipUnavailable skips t (or fails it, where a sandbox is required) when
// err says this machine lacks a containment mode; other errors return.
func skipUnavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrUnavailable) {
		launchtest.Unavailable(t, "this machine lacks the sandbox: %v", err)
	}
}

// runFor runs argv under a deadline.
func runFor(t testing.TB, r *Runner, timeout time.Duration, argv ...string) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.Run(ctx, RunSpec{Argv: argv})
}

// procsWith lists the pids whose environment or command line holds marker.
func procsWith(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + e.Name() + "/" + f)
			if err == nil && strings.Contains(string(b), marker) {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// procsOfUID lists the processes (zombies included) whose real uid is uid.
func procsOfUID(uid int) []string {
	var pids []string
	want := fmt.Sprintf("Uid:\t%d\t", uid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err == nil && strings.Contains(string(b), want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// socketProbe is a perl program (perl-base is essential on Debian: every
// machine has it, and the minimal root too) that makes the sockets its
// arguments name, each "socket F T P [HOST PORT]" (connecting when a port
// is given) or "socketpair F T P", and prints a line per case: "ok", or
// the call that failed and its errno.
const socketProbe = `use Socket qw(:all);
$| = 1;
for (@ARGV) {
	my ($call, $f, $t, $p, $host, $port) = split / /;
	if ($call eq "socketpair") {
		if (socketpair(my $a, my $b, $f, $t, $p)) { print "ok\n" } else { print "socketpair errno ", $!+0, "\n" }
		next;
	}
	my $s;
	unless (socket($s, $f, $t, $p)) { print "socket errno ", $!+0, "\n"; next }
	unless (defined $port) { print "ok\n"; next }
	my $sa = $f == AF_INET6 ? pack_sockaddr_in6($port, inet_pton(AF_INET6, $host)) : pack_sockaddr_in($port, inet_aton($host));
	if (connect($s, $sa)) { print "ok\n" } else { print "connect errno ", $!+0, "\n" }
}`

// sockCase is one case of socketProbe.
type sockCase struct {
	call              string // socket or socketpair
	family, typ, prot int
	host              string
	port              int
}

func (c sockCase) String() string {
	s := fmt.Sprintf("%s %d %d %d", c.call, c.family, c.typ, c.prot)
	if c.port != 0 {
		s += fmt.Sprintf(" %s %d", c.host, c.port)
	}
	return s
}

// probeSockets runs socketProbe on cases in r and returns its answer to
// each ("ok", "socket errno 1", ...).
func probeSockets(t testing.TB, r *Runner, cases []sockCase) []string {
	t.Helper()
	argv := []string{"/usr/bin/perl", "-e", socketProbe}
	for _, c := range cases {
		argv = append(argv, c.String())
	}
	res, err := runFor(t, r, 30*time.Second, argv...)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
	if !res.OK || len(got) != len(cases) {
		t.Fatalf("the socket probe: ok %v, stdout %q, stderr %q", res.OK, res.Stdout, res.Stderr)
	}
	return got
}
