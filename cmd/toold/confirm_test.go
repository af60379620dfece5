package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/state/statetest"
)

// confirmConfig makes echo a tool that needs a confirmation token, with a
// secret shared by every toold started from it.
func confirmConfig(t *testing.T, extra string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "toold.yaml")
	cfg := "server: {confirm_secret: shared-confirmation-secret-0123456789abcdef}\n" +
		"tools: {echo: {enabled: true, confirmation: token}}\n" + extra
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// confirmAnswer is an answer of echo with the confirmation fields.
type confirmAnswer struct {
	code int
	env  struct {
		Status string
		Error  *struct {
			Type, Code, Message string
			ConfirmToken        string `json:"confirm_token"`
		}
	}
}

// confirmCall sends echo's call, with a token when one is given.
func (in *instance) confirmCall(token string) confirmAnswer {
	in.t.Helper()
	req, _ := http.NewRequest("POST", in.url+"/tools/echo/execute", strings.NewReader(`{"message":"delete everything"}`))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Toold-Confirm", token)
	}
	resp, err := in.client.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := confirmAnswer{code: resp.StatusCode}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &a.env); err != nil {
		in.t.Fatalf("%d %s", resp.StatusCode, body)
	}
	return a
}

// spend gets a token from one toold and uses it there.
func spend(t *testing.T, in *instance) string {
	t.Helper()
	first := in.confirmCall("")
	if first.code != 428 || first.env.Error == nil || first.env.Error.ConfirmToken == "" {
		t.Fatalf("the first call: %d %+v", first.code, first.env)
	}
	tok := first.env.Error.ConfirmToken
	if used := in.confirmCall(tok); used.code != 200 || used.env.Status != "success" {
		t.Fatalf("the confirmed call: %d %+v", used.code, used.env)
	}
	return tok
}

// refused checks that a replayed token ran nothing.
func refused(t *testing.T, where string, a confirmAnswer) {
	t.Helper()
	if a.code != 428 || a.env.Error == nil || a.env.Error.Code != "token_refused" {
		t.Errorf("%s: a used token was accepted again: %d %+v", where, a.code, a.env)
	}
}

// TestConfirmationTokenReplay is finding 4 of issue 16: used tokens lived
// in one process's memory, so the same token ran its call again after a
// restart, or on another replica. Their single use is now recorded in the
// state store every replica shares.
func TestConfirmationTokenReplay(t *testing.T) {
	t.Run("after a restart", func(t *testing.T) {
		cfg, dir := confirmConfig(t, ""), t.TempDir()
		first := start(t, nil, "-config", cfg, "-workspace", workspace(t), "-state-dir", dir)
		tok := spend(t, first)
		refused(t, "the same process", first.confirmCall(tok))
		if err := first.shutdown(); err != nil {
			t.Fatal(err)
		}
		again := start(t, nil, "-config", cfg, "-workspace", workspace(t), "-state-dir", dir)
		refused(t, "after a restart", again.confirmCall(tok))
	})
	t.Run("on another replica", func(t *testing.T) {
		ns := statetest.StartServer(t)
		cfg := confirmConfig(t, "")
		// Replicas of a shared store sign the audit log with one key.
		env := map[string]string{"TOOLD_AUDIT_SIGNING_KEY": strings.Repeat("5a", 32)}
		a := start(t, env, "-config", cfg, "-workspace", workspace(t), "-nats-url", ns.URL)
		b := start(t, env, "-config", cfg, "-workspace", workspace(t), "-nats-url", ns.URL)
		tok := spend(t, a)
		refused(t, "replica B", b.confirmCall(tok))
		// A token B issued and nobody used works on A: the replicas
		// share the secret.
		fresh := b.confirmCall("")
		if fresh.env.Error == nil {
			t.Fatalf("no challenge on B: %+v", fresh.env)
		}
		if ok := a.confirmCall(fresh.env.Error.ConfirmToken); ok.code != 200 {
			t.Errorf("B's unused token on A: %d %+v", ok.code, ok.env)
		}
	})
}
