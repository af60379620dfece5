package state_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/testpeer"
)

// oldServer is a nats-server older than 2.12 to refuse: TOOLD_NATS_OLD,
// which .ci/run builds from test/natsold. Without it the test skips,
// saying how to build it; with TOOLD_REQUIRE_NATS_OLD=1 (CI) it fails.
func oldServer(t *testing.T) string {
	t.Helper()
	return testpeer.Binary(t, "TOOLD_NATS_OLD", "", "TOOLD_REQUIRE_NATS_OLD",
		"no nats-server older than 2.12 to refuse: build one with "+
			"`(cd test/natsold && go build -o \"$(go env GOPATH)/bin/nats-server-2.11\" github.com/nats-io/nats-server/v2)` "+
			"and set TOOLD_NATS_OLD to its path (as .ci/run does)")
}

// TestRefusesAServerTooOld: on a real nats-server 2.11 (no message
// schedules, which toold's timers are), Open fails saying which version
// the server runs and which toold needs, and leaves nothing on it: no
// bucket, no stream.
func TestRefusesAServerTooOld(t *testing.T) {
	bin := oldServer(t)
	port := strconv.Itoa(statetest.FreePort(t))
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", t.TempDir())
	if err := statetest.StartReady(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "nats://127.0.0.1:" + port
	st, err := state.Open(context.Background(), state.Options{URL: url, Name: "r1"})
	if err == nil {
		st.Close()
		t.Fatal("toold opened its store on a nats-server older than 2.12")
	}
	for _, want := range []string{"runs nats-server 2.11.", "needs 2.12 or later on every server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names := js.StreamNames(context.Background())
	for name := range names.Name() {
		t.Errorf("stream %s was left on the refused server", name)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}
