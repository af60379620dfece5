package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestSecondServerAsDocumented runs docs/examples.md's "second server on
// the same checkout" as written, while the default server runs, as
// README's quick start starts it: both must start and answer. They listen
// on the documented ports (8080, 9090 and the second's), so the test runs
// them in a network namespace of its own, where nothing else holds those.
func TestSecondServerAsDocumented(t *testing.T) {
	if os.Getenv("TOOLD_TEST_IN_NETNS") == "1" {
		secondServerInNamespace(t)
		return
	}
	block := secondServerBlock(t)
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	inOwnNetns(t, "TestSecondServerAsDocumented", "1", "TOOLD_TEST_BIN="+bin, "TOOLD_TEST_BLOCK="+block)
}

// inOwnNetns runs the test named again, in this binary, in a network
// namespace of its own (and a user namespace when not root), with
// TOOLD_TEST_IN_NETNS=marker and env added: the test's half inside runs
// documented blocks on their fixed ports, where nothing else holds them.
// A namespace the kernel refuses skips, saying so; a failure inside fails
// the test with its output.
func inOwnNetns(t *testing.T, test, marker string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "TOOLD_TEST_IN_NETNS="+marker), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil { // it never started: the clone was refused
		launchtest.Unavailable(t, "SKIPPED: the test cannot make a network namespace of its own: %v", err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("in its own network namespace:\n%s", out)
}

// secondServerBlock is the shell block docs/examples.md gives for a
// second server on the same checkout.
func secondServerBlock(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/examples.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)So a second server on the same checkout.*?```sh\n(.*?)```").FindSubmatch(doc)
	if m == nil || !strings.Contains(string(m[1]), "go run ./cmd/toold") {
		t.Fatal("docs/examples.md has no second-server command")
	}
	return string(m[1])
}

// secondServerInNamespace is the test's half inside the namespace: the
// default server from the checkout, then the documented block, with
// `go run ./cmd/toold` standing for the toold built once.
func secondServerInNamespace(t *testing.T) {
	if err := loopbackUp(); err != nil {
		t.Fatalf("bringing loopback up: %v", err)
	}
	bin, block := os.Getenv("TOOLD_TEST_BIN"), os.Getenv("TOOLD_TEST_BLOCK")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "TMPDIR="+t.TempDir())
	first := exec.Command(bin)
	firstURLs := startShell(t, first, root, env)
	script := strings.ReplaceAll(block, "go run ./cmd/toold", bin)
	secondURLs := startShell(t, exec.Command("sh", "-ec", script), root, env)
	for _, u := range append(firstURLs, secondURLs...) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", u, resp.StatusCode)
		}
	}
	if firstURLs[0] == secondURLs[0] || firstURLs[1] == secondURLs[1] {
		t.Errorf("the two servers share an address: %v %v", firstURLs, secondURLs)
	}
	t.Logf("the default server: %v; the second: %v", firstURLs, secondURLs)
}

// startShell starts cmd (which may leave toold running in the background,
// as `&` does) in a process group of its own, killed at the end, and
// returns the /healthz and /metrics URLs of the toold it started, read from
// its start-up lines as they come.
func startShell(t *testing.T, cmd *exec.Cmd, dir string, env []string) []string {
	t.Helper()
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// An OS pipe, whose reader sees the end once every process that
	// holds it (the shell, the toold it left running) is gone.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL); _ = cmd.Wait(); r.Close() })
	lines := linesOf(r)
	var api, metrics, said string
	timeout := time.After(30 * time.Second)
	for api == "" || metrics == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("%v ended before it served:\n%s", cmd.Args, said)
			}
			said += line + "\n"
			if m := listenLine.FindStringSubmatch(line); m != nil {
				api = m[1] + "/healthz"
			}
			if m := adminLine.FindStringSubmatch(line); m != nil {
				metrics = m[1] + "/metrics"
			}
		case <-timeout:
			t.Fatalf("%v did not start within 30 s:\n%s", cmd.Args, said)
		}
	}
	go func() { // the rest of what it says, so it never blocks on the pipe
		for range lines {
		}
	}()
	return []string{api, metrics}
}

// loopbackUp brings up lo, which a new network namespace has down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
