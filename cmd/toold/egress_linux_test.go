package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/egress/egresstest"
	"github.com/toold/toold/internal/launch/launchtest"
)

// TestEgressInjectsTheCallersOwn: issue 41 (secrets injected at the
// proxy) with issue 40's vault, end to end. A command tool's sandbox
// injects "Bearer ${user:github}" for its host; alice and bob, each with
// an API key, set their own github credential over /credentials and call
// the tool: curl inside the sandbox reaches the test's TLS server through
// toold's egress proxy, and the server sees alice's value on alice's call
// and bob's on bob's. Neither value is in the run's environment or
// /proc/self/environ (the tool prints both), in the envelope (the
// server's echo of the header is redacted before the run reads it), in
// toold's logs or in its audit log (which names the credential used). A
// caller who has set none is refused at the proxy, naming it.
func TestEgressInjectsTheCallersOwn(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		launchtest.Unavailable(t, "SKIPPED: curl is not installed (apt-get install curl)")
	}
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	const (
		alice = "toold_alice_key_for_the_egress_tests_0"
		bob   = "toold_bob_key_for_the_egress_tests_000"
		carol = "toold_carol_key_for_the_egress_tests_0"
		ops   = "toold_ops_key_for_the_egress_tests_000"
	)
	secrets := map[string]string{alice: "ghp_alice_0123456789abcdefEGRESS", bob: "ghp_bob_fedcba9876543210zyxEGRESS"}
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
auth:
  keys:
    - {name: alice, sha256: %s, tools: ["*"]}
    - {name: bob, sha256: %s, tools: ["*"]}
    - {name: carol, sha256: %s, tools: ["*"]}
    - {name: ops, sha256: %s, tools: ["*"], roles: [call, admin, observe]}
credentials:
  key: ${TOOLD_CREDENTIALS_KEY}
server: {drain_grace: 1s}
commands:
  tools:
    - name: gh
      description: Ask the API as the caller, and show what the run can see.
      parameters: {type: object}
      argv: [sh, -c, 'env; echo ---; tr "\0" "\n" < /proc/self/environ; echo ---; curl -sS --fail-with-body https://127.0.0.1:%s/user']
      sandbox:
        network:
          allow: ["127.0.0.1:%s"]
          inject: [{host: 127.0.0.1, header: Authorization, value: "Bearer ${user:github}"}]
          ca_files: [%s]
`, auth.Hash(alice), auth.Hash(bob), auth.Hash(carol), auth.Hash(ops), port, port, ca.File))
	in := start(t, map[string]string{"TOOLD_CREDENTIALS_KEY": credentials.NewKey()}, "-config", cfg, "-workspace", launchtest.Workspace(t))
	for key, v := range secrets {
		if code, env := as(t, in, key, "PUT", "/credentials/github", `{"value":"`+v+`"}`); code != 200 && code != 201 {
			t.Fatalf("PUT /credentials/github: %d %v", code, env)
		}
	}
	var reachable strings.Builder // everything a run or a caller was given
	for _, key := range []string{alice, bob, alice} {
		before := len(srv.Seen())
		code, env := as(t, in, key, "POST", "/tools/gh/execute", `{}`)
		b, _ := json.Marshal(env)
		reachable.Write(b)
		if code != 200 || env["success"] != true || !strings.Contains(string(b), "[redacted by toold]") {
			t.Fatalf("a call: %d %s", code, b)
		}
		if seen := srv.Seen()[before:]; len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+secrets[key] {
			t.Errorf("the server saw %+v, want the caller's own", seen)
		}
		data, _ := env["data"].(map[string]any)
		if stdout, _ := data["stdout"].(string); !strings.Contains(stdout, "HTTPS_PROXY=http://127.0.0.1:") ||
			strings.Count(stdout, "SSL_CERT_FILE=") != 2 {
			t.Errorf("the run's environment was not printed whole: %s", stdout)
		}
	}
	code, env := as(t, in, carol, "POST", "/tools/gh/execute", `{}`)
	b, _ := json.Marshal(env)
	reachable.Write(b)
	if code != 200 || env["success"] == true || !strings.Contains(string(b), `"reason":"credential_missing"`) ||
		!strings.Contains(string(b), `github`) {
		t.Errorf("carol, who set none: %d %s", code, b)
	}
	audit := in.waitAudit(t, ops, regexp.MustCompile(`credential_use`))
	reachable.WriteString(audit)
	reachable.WriteString(in.stdout.String())
	reachable.WriteString(in.stderr.String())
	for _, v := range secrets {
		if strings.Contains(reachable.String(), v) {
			t.Errorf("a caller's secret is in an envelope, toold's logs or its audit log:\n%s", reachable.String())
		}
	}
}
