package consult

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/toold/toold/internal/dispatch"
)

// TestEncodedSecretInPromptIsRedacted: a secret in a prompt written in
// base64, %XX or split by a zero-width space reaches no provider either
// (issue 16): the input sanitizer's detectors see the decoded view.
func TestEncodedSecretInPromptIsRedacted(t *testing.T) {
	e := newEnv(t)
	r := e.build(Config{Providers: map[string]ProviderConfig{"gem": e.cli("gem", "json"), "api": e.apiProvider("small")}})
	const key, token = "AKIAQYLPMN5HHHFPZAM2", "ghp_R8hTq2ZLmV5xW0cNs4Ye7Kd1Fa9Pb3Gu6Jo0"
	b64 := base64.StdEncoding.EncodeToString([]byte("aws_access_key_id = " + key))
	pct := strings.ReplaceAll(url.QueryEscape(token), "_", "%5F")
	zw := token[:10] + "\u200b" + token[10:]
	prompt := "Config is " + b64 + " and the token " + pct + " (also " + zw + "); why does it fail?"
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "providers": []string{"gem", "api"}})
	env := r.call("consult_many", string(body), nil)
	if env.Status != dispatch.StatusSuccess {
		t.Fatalf("%s %+v", env.Status, env.Error)
	}
	sent := e.recorded("gem", "prompt") + "\n" + e.apiBodies()
	for _, leak := range []string{b64, pct, zw, key, token, token[4:20]} {
		if strings.Contains(sent, leak) {
			t.Errorf("a provider received %q: %s", leak, sent)
		}
	}
	// The base64 quanta before the key ("aws_access_key_id = ") stay.
	if got := e.recorded("gem", "prompt"); !has(got, "Config is YXdzX2FjY2Vzc19rZXlfaWQg[REDACTED:aws_access_key_id] and the token [REDACTED:github_token] (also [REDACTED:github_token])") {
		t.Errorf("the CLI received %q", got)
	}
	if env.Sanitized.Redactions < 3 {
		t.Errorf("sanitized %+v", env.Sanitized)
	}
}
