package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toold/toold/internal/oauth/oidctest"
)

// TestIdentityTryItLocally runs docs/identity.md's "Try it locally" as
// written: the real OpenID Provider (zitadel/oidc's, test/oidc), toold
// trusting it, a token from it and a call with that token, and the call
// without one refused. The block uses fixed ports (8080, 9090, 9998), so
// it runs in a network namespace of its own. It also holds the section's
// claim that without `allow` -check-config names the key and its value.
func TestIdentityTryItLocally(t *testing.T) {
	if os.Getenv("TOOLD_TEST_IN_NETNS") == "identity" {
		identityInNamespace(t)
		return
	}
	provider := oidctest.Binary(t)
	block := identityBlock(t)
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	inOwnNetns(t, "TestIdentityTryItLocally", "identity", "TOOLD_TEST_BIN="+bin, "TOOLD_TEST_BLOCK="+block, "TOOLD_TEST_OIDC="+provider)
}

// identityBlock is the shell block of docs/identity.md's "Try it locally".
func identityBlock(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/identity.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## Try it locally\n.*?```sh\n(.*?)```").FindSubmatch(doc)
	if m == nil || !strings.Contains(string(m[1]), "go run ./cmd/toold -config") {
		t.Fatal("docs/identity.md has no \"Try it locally\" block")
	}
	return string(m[1])
}

// identityInNamespace is the test's half inside the namespace: the block
// with the provider built once (TOOLD_OIDC) for its build line, the toold
// built once for `go run ./cmd/toold`, and a directory of the test's own
// for /tmp.
func identityInNamespace(t *testing.T) {
	if err := loopbackUp(); err != nil {
		t.Fatalf("bringing loopback up: %v", err)
	}
	bin, block, provider := os.Getenv("TOOLD_TEST_BIN"), os.Getenv("TOOLD_TEST_BLOCK"), os.Getenv("TOOLD_TEST_OIDC")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	build := regexp.MustCompile(`(?m)^\(cd test/oidc && go build .*\n`)
	if !build.MatchString(block) {
		t.Fatal("the block no longer builds the provider as the test expects")
	}
	script := build.ReplaceAllString(block, "")
	script = strings.ReplaceAll(script, "/tmp/toold-idp", tmp+"/toold-idp")
	script = strings.ReplaceAll(script, `"$(go env GOPATH)/bin/toold-oidc"`, strconv.Quote(provider))
	script = strings.ReplaceAll(script, "go run ./cmd/toold", bin)

	home := t.TempDir()
	logPath := filepath.Join(tmp, "out.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	// The provider and toold stay behind the shell, as `&` leaves them.
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-done
	}
	out, _ := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("the block failed: %v\n%s", err, out)
	}
	for _, want := range []string{"toold-idp.yaml: ok", `"status":"success"`, "without a token: 401"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the block's output lacks %q:\n%s", want, out)
		}
	}

	// Without allow, -check-config says what start would refuse, and how to
	// let it through.
	cfg, err := os.ReadFile(filepath.Join(tmp, "toold-idp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	noAllow := regexp.MustCompile(`(?m)^\s*allow: \[127\.0\.0\.1\].*\n`).ReplaceAll(cfg, nil)
	if string(noAllow) == string(cfg) {
		t.Fatal("the block's configuration has no allow line")
	}
	path := filepath.Join(tmp, "no-allow.yaml")
	if err := os.WriteFile(path, noAllow, 0o600); err != nil {
		t.Fatal(err)
	}
	said, err := exec.Command(bin, "-check-config", path).CombinedOutput()
	if err == nil || !strings.Contains(string(said), "auth.oauth.allow: the issuer http://127.0.0.1:9998/ is refused") ||
		!strings.Contains(string(said), "set auth.oauth.allow: [127.0.0.1]") {
		t.Errorf("-check-config without allow: %v\n%s", err, said)
	}
}
