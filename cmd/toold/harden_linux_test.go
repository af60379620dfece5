package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/launchtest"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/command"
)

// hardenReport is what the helper process says about itself.
type hardenReport struct {
	Dumpable   int    `json:"dumpable"`
	Getenv     string `json:"getenv"`
	Environ    string `json:"environ"`
	Command    string `json:"command"`
	CommandErr string `json:"command_err"`
	UID        int    `json:"uid"`
}

// TestHardenHelper is the helper process of the tests below: it runs only
// when they start the test binary with TOOLD_HARDEN_HELPER set. TestMain
// has hardened it by then, as main hardens toold.
func TestHardenHelper(t *testing.T) {
	if os.Getenv("TOOLD_HARDEN_HELPER") == "" {
		t.Skip("helper process of TestHardened*; runs only when they start it")
	}
	rep := hardenReport{UID: os.Getuid(), Getenv: os.Getenv("I15_TEST_API_KEY")}
	d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	rep.Dumpable = d
	env, _ := os.ReadFile("/proc/self/environ")
	rep.Environ = string(env)
	if os.Getenv("TOOLD_HARDEN_COMMAND") != "" {
		// A command tool under explicit containment none, as toold's own
		// uid when toold is not root, looks at its parent: toold.
		ws := t.TempDir()
		tc := command.ToolConfig{Name: "peek", Description: "peek",
			Argv: []command.Arg{{Arg: "sh"}, {Arg: "-c"},
				{Arg: `cat /proc/$PPID/environ; exec 3</proc/$PPID/mem && echo mem-opened; ls /proc/$PPID/fd >/dev/null && echo fds-listed`}}}
		l, err := launch.New(launch.Config{Containment: "none"}, ws)
		var s *command.Set
		if err == nil {
			defer l.Close()
			s, err = command.New(command.Config{Config: launch.Config{Containment: "none"}, Tools: []command.ToolConfig{tc}}, l, zap.NewNop())
		}
		if err != nil {
			rep.CommandErr = err.Error()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := s.Tools()[0].Execute(ctx, tools.NewCall([]byte(`{}`), "t", "t", nil))
			if te, ok := tools.AsError(err); ok && te.Result != nil {
				out, err = te.Result, nil // it ran, and failed: what it saw is in its result
			}
			if err != nil {
				rep.CommandErr = err.Error()
			} else {
				r := out.(*command.Result)
				rep.Command = r.Stdout + r.Stderr
			}
		}
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("HARDEN-REPORT %s\n", b)
}

// runHelper starts this test binary as the helper, as uid 65534 through
// setpriv when asked (and root), with a secret in its environment.
func runHelper(t *testing.T, secret string, asNobody, withCommand bool) hardenReport {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{bin, "-test.run", "^TestHardenHelper$", "-test.v"}
	if asNobody {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			launchtest.Unavailable(t, "setpriv is not installed: cannot run toold as a non-root uid here")
		}
		// The build cache is root's alone: a copy the uid can execute.
		dir := t.TempDir()
		_ = os.Chmod(dir, 0o755)
		copyBin := filepath.Join(dir, "toold.test")
		copyFile(t, bin, copyBin)
		argv = []string{setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", copyBin,
			"-test.run", "^TestHardenHelper$", "-test.v"}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"TOOLD_HARDEN_HELPER=1", "I15_TEST_API_KEY=" + secret, "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}
	if withCommand {
		cmd.Env = append(cmd.Env, "TOOLD_HARDEN_COMMAND=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if js, ok := strings.CutPrefix(strings.TrimSpace(line), "HARDEN-REPORT "); ok {
			var rep hardenReport
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatal(err)
			}
			return rep
		}
	}
	t.Fatalf("no report from the helper:\n%s", out)
	return hardenReport{}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHardenedAtStart: toold is non-dumpable and its kernel-visible
// environment holds no secret, while toold itself still reads it.
func TestHardenedAtStart(t *testing.T) {
	secret := fmt.Sprintf("sk-i15-%d", time.Now().UnixNano())
	rep := runHelper(t, secret, false, false)
	if rep.Dumpable != 0 {
		t.Errorf("dumpable = %d, want 0", rep.Dumpable)
	}
	if rep.Getenv != secret {
		t.Errorf("toold lost the variable: %q", rep.Getenv)
	}
	if strings.Contains(rep.Environ, secret) || !strings.Contains(rep.Environ, "I15_TEST_API_KEY=") {
		t.Errorf("/proc/self/environ: %q", rep.Environ)
	}
}

// TestHardenedCommandCannotReadToold: issue 15 finding 2. toold not root,
// a command tool under explicit containment none: it runs as toold's uid
// and used to read toold's /proc/PID/environ (secrets) and open its memory.
func TestHardenedCommandCannotReadToold(t *testing.T) {
	secret := fmt.Sprintf("sk-i15-%d", time.Now().UnixNano())
	rep := runHelper(t, secret, os.Getuid() == 0, true)
	if rep.UID == 0 {
		launchtest.NeedsRoot(t, "could not run the helper as a non-root uid")
	}
	if rep.CommandErr != "" {
		t.Fatalf("the command tool did not run: %s", rep.CommandErr)
	}
	t.Logf("as uid %d the command saw: %q", rep.UID, rep.Command)
	for _, leak := range []string{secret, "mem-opened", "fds-listed", "TOOLD_HARDEN_HELPER"} {
		if strings.Contains(rep.Command, leak) {
			t.Errorf("the command got %q from toold's /proc entry", leak)
		}
	}
}
