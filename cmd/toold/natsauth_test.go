package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/state/statetest"
)

// TestListenRequiresCredentials is finding 6 of issue 16 end to end: toold
// asked to let the embedded store listen without credentials refuses to
// start and says what to set; with a token it starts, an anonymous NATS
// client is refused, and a second toold holding the token runs on its
// store.
func TestListenRequiresCredentials(t *testing.T) {
	port := statetest.FreePort(t)
	write := func(nats string) string {
		f := filepath.Join(t.TempDir(), "toold.yaml")
		os.WriteFile(f, []byte(fmt.Sprintf("state:\n  nats: {listen: \"127.0.0.1:%d\"%s}\n", port, nats)), 0o600)
		return f
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := run(ctx, []string{"-config", write(""), "-listen", "127.0.0.1:0", "-admin-listen", "off", "-workspace", t.TempDir(),
		"-state-dir", t.TempDir()}, func(string) (string, bool) { return "", false }, nil, &out, &errOut)
	if err != exitCode(2) || !strings.Contains(errOut.String(), "state.nats.listen") || !strings.Contains(errOut.String(), "credentials") {
		t.Fatalf("toold listening without credentials: %v\n%s%s", err, out.String(), errOut.String())
	}

	token := statetest.Token()
	env := map[string]string{"TOOLD_NATS_TOKEN": token}
	withToken := write(", token: \"${TOOLD_NATS_TOKEN}\"")
	firstDir := t.TempDir()
	start(t, env, "-config", withToken, "-workspace", workspace(t), "-state-dir", firstDir)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if got := statetest.AnonymousConnect(t, url); !strings.Contains(got, "Authorization Violation") {
		t.Errorf("an anonymous client of toold's store got %q", got)
	}
	// The second replica: the first's store, the same token, and the
	// audit key of the first (in its state directory).
	key, err := os.ReadFile(filepath.Join(firstDir, generatedKey))
	if err != nil {
		t.Fatal(err)
	}
	env2 := map[string]string{"TOOLD_NATS_TOKEN": token, auditKeyEnv: string(key)}
	cfg2 := filepath.Join(t.TempDir(), "replica.yaml")
	os.WriteFile(cfg2, []byte("state: {nats: {token: \"${TOOLD_NATS_TOKEN}\"}}\n"), 0o600)
	second := start(t, env2, "-config", cfg2, "-workspace", workspace(t), "-nats-url", url)
	if code, body := second.get("/readyz"); code != 200 {
		t.Errorf("the replica with the token: /readyz %d %s", code, body)
	}
}
