package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestGrepIsNoSecretOracle: served by toold, grep matches redacted lines
// (fs.Options.Redactor is wired to the sanitizer), so the right guess at
// a token's next character looks like every wrong one, and an encoded
// token is not returned either (issue 16, finding 7).
func TestGrepIsNoSecretOracle(t *testing.T) {
	const token = "ghp_Qm7Rk2Vx9LpT4sWz8Nd1Hc6Yb3Fj5Ga0Eu2K"
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("GITHUB_TOKEN="+token+"\nURL_TOKEN=ghp%5F"+token[4:]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-workspace", ws)
	results := map[string]string{}
	for _, guess := range []string{"ghp_Q", "ghp_R", "ghp_Qm", "ghp_Qn", "ghp%5FQ", "ghp%5FR"} {
		code, env := in.exec("grep", mustJSON(map[string]any{"pattern": regexp.QuoteMeta(guess)}))
		if code != 200 {
			t.Fatalf("grep %q: %d %v", guess, code, env)
		}
		results[guess] = mustJSON(env["data"])
		if strings.Contains(mustJSON(env), token[4:12]) {
			t.Errorf("grep %q returned the token: %s", guess, mustJSON(env))
		}
	}
	for guess, got := range results {
		if got != results["ghp_R"] {
			t.Errorf("grep %q answers %s, a wrong guess %s", guess, got, results["ghp_R"])
		}
	}
	_, env := in.exec("grep", `{"pattern":"REDACTED:github_token"}`)
	if got := mustJSON(env["data"]); strings.Count(got, `"line"`) != 2 {
		t.Errorf("the markers are not searchable: %s", got)
	}
	// What grep masked is counted as any redaction: in the envelope (the
	// two lines returned, one token each) and in the metrics.
	san, _ := env["sanitized"].(map[string]any)
	if byKind, _ := san["by_kind"].(map[string]any); san["redactions"] != 2.0 || byKind["github_token"] != 2.0 {
		t.Errorf("sanitized %v, want 2 github_token redactions", san)
	}
	if _, m := do(t, in.admin, "GET", "/metrics", "", 5*time.Second); !strings.Contains(m, `toold_redactions_total{direction="output",kind="github_token",tool="grep"}`) {
		t.Errorf("the metrics do not count grep's redactions")
	}
}

// TestReadFileWindowInAKey: served by toold, read_file masks lines before
// it windows them, so a read that starts inside a private key block shows
// none of its body, and counts what it masked.
func TestReadFileWindowInAKey(t *testing.T) {
	const key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzQ8kq3\nR7vW2xYp4LmN9sT6\n-----END RSA PRIVATE KEY-----\n"
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "key.pem"), []byte("a\nb\n"+key+"c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-workspace", ws)
	code, env := in.exec("read_file", `{"paths":["key.pem"],"offset":4}`)
	got := mustJSON(env)
	san, _ := env["sanitized"].(map[string]any)
	if code != 200 || strings.Contains(got, "MIIEowIBAAKCAQEAzQ8kq3") || strings.Contains(got, "R7vW2xYp4LmN9sT6") || san["redactions"] == 0.0 {
		t.Errorf("read_file from inside the key: %d %s", code, got)
	}
}

// TestSplitTokensDoNotComeBack: issue 38, finding 4. Served by toold, a
// token split across two lines of a file, or across two string fields of
// a JSON file, came back whole through read_file (its line numbers stood
// between the pieces) and through a command's output (a JSON text in
// stdout is text). Neither piece comes back now, by either way.
func TestSplitTokensDoNotComeBack(t *testing.T) {
	const a, b = "ghp_Qm7Rk2Vx9LpT4sWz", "8Nd1Hc6Yb3Fj5Ga0Eu2K"
	ws := launchtest.Workspace(t) // the run-as uid's to read
	files := map[string]string{
		"deploy.sh":    "export GITHUB_TOKEN=" + a + "\n  " + b + "\n",
		"config.json":  "{\n  \"part1\": \"" + a + "\",\n  \"part2\": \"" + b + "\"\n}\n",
		"compact.json": `{"part1":"` + a + `","part2":"` + b + `"}` + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(cfg, []byte("commands:\n  containment: none\n  tools:\n"+
		"    - {name: show, description: cat a file, argv: [cat, {arg: '{{.path}}'}], "+
		"parameters: {type: object, properties: {path: {type: string}}, required: [path]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", ws)
	for name := range files {
		for _, call := range [][2]string{{"read_file", `{"paths":["` + name + `"]}`}, {"show", `{"path":"` + name + `"}`}} {
			code, env := in.exec(call[0], call[1])
			got := mustJSON(env)
			if code != 200 || strings.Contains(got, a[4:12]) || strings.Contains(got, b[:10]) {
				t.Errorf("%s of %s: %d %s", call[0], name, code, got)
			}
		}
	}
}
