// Package testpeer is how a test finds a peer it needs that Go does not
// provide — a binary .ci/run builds or installs (Jaeger, the OpenID
// Provider, an old nats-server, Chromium, npm packages) — and what it does
// when the peer is missing: on a developer's machine it skips, saying how
// to install the peer; where the peer's TOOLD_REQUIRE_* variable is "1"
// (CI sets them all) it fails, so a missing install step cannot pass green.
package testpeer

import (
	"os"
	"os/exec"
	"testing"
)

// Missing ends the test for a missing peer: a failure when the variable
// require is "1", else a skip. why says what is missing and how to get it.
func Missing(tb testing.TB, require, why string) {
	tb.Helper()
	if os.Getenv(require) == "1" {
		tb.Fatalf("%s=1, and %s", require, why)
	}
	tb.Skip("SKIPPED: " + why)
}

// Binary is the path of a peer's program: the variable env when set, else
// name on PATH (when name is not empty); else the test ends as Missing.
func Binary(tb testing.TB, env, name, require, why string) string {
	tb.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if name != "" {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(tb, require, why)
	return ""
}

// Git is the path of git, for the tests that run it (the command tools'
// guards, the examples); without git they skip, and fail where
// TOOLD_REQUIRE_GIT=1 (CI).
func Git(tb testing.TB) string {
	tb.Helper()
	return Binary(tb, "", "git", "TOOLD_REQUIRE_GIT", "git is not installed (apt-get install git)")
}
