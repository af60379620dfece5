package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// TestAuditCommands: every call of a run leaves an audit record; `toold
// audit export` writes them, `toold audit verify` checks the store and an
// export, and finds a record removed from the store or altered in an
// export.
func TestAuditCommands(t *testing.T) {
	dir := t.TempDir()
	in := start(t, nil, "-workspace", workspace(t), "-state-dir", dir)
	const calls = 5
	for i := range calls {
		if code, _ := in.exec("read_file", `{"paths":["hello.txt"]}`); code != 200 {
			t.Fatalf("read_file: %d", code)
		}
		in.waitAudited(t, i+1) // appended before the next: records in messages of their own
	}
	in.exec("read_file", `{"paths":"not a list"}`)
	if err := in.shutdown(); err != nil {
		t.Fatal(err)
	}
	audit := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"audit"}, args...), func(string) (string, bool) { return "", false }, nil, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	export := filepath.Join(t.TempDir(), "audit.jsonl")
	if out, err := audit("export", "-state-dir", dir, "-o", export); err != nil || !strings.Contains(out, "exported 6 audit records") {
		t.Fatalf("export: %v %s", err, out)
	}
	data, _ := os.ReadFile(export)
	if n := strings.Count(string(data), `"action":"execute"`); n != calls+1 || !strings.Contains(string(data), `"status":"rejected"`) {
		t.Errorf("the export holds %d call records:\n%s", n, data)
	}
	if out, err := audit("verify", "-state-dir", dir); err != nil || !strings.Contains(out, "6 records (1 to 6) chain intact") {
		t.Fatalf("verify: %v %s", err, out)
	}
	tampered := filepath.Join(t.TempDir(), "tampered.jsonl")
	os.WriteFile(tampered, bytes.Replace(data, []byte(`"caller":"anonymous"`), []byte(`"caller":"someone-else"`), 1), 0o600)
	// An export is checked with the public key toold wrote beside the
	// key it made in the store's directory.
	pub := filepath.Join(dir, "audit-signing.pub")
	if out, err := audit("verify", "-file", tampered, "-public-key", pub); err == nil || !strings.Contains(out, "altered") {
		t.Errorf("an altered export passed: %v %s", err, out)
	}
	if out, err := audit("verify", "-file", export, "-public-key", pub); err != nil {
		t.Errorf("the intact export failed: %v %s", err, out)
	}
	if out, err := audit("verify", "-file", export, "-public-key", "ed25519:"+strings.Repeat("00", 32)); err == nil ||
		!strings.Contains(out, "not given") {
		t.Errorf("an export checked with another key passed: %v %s", err, out)
	}
	// Remove one record from the middle of the store's log (the stream
	// refuses to delete a message: a client of the store writes it anew).
	lines := auditLines(t, dir)
	rewriteAudit(t, dir, append(lines[:2:2], lines[3:]...))
	if out, err := audit("verify", "-state-dir", dir); err == nil || !strings.Contains(out, "removed") {
		t.Errorf("verify after a record was removed from the store: %v %s", err, out)
	}
}

// TestAuditReadsEnvironment: `toold audit` finds the store where the server
// does, TOOLD_STATE_DIR included, and not in the default directory (where
// it would find no records and report an all-clear).
func TestAuditReadsEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_STATE_HOME", home) // the default directory, should the variable be ignored
	dir := filepath.Join(t.TempDir(), "store")
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"TOOLD_STATE_DIR": dir}[k]
		return v, ok
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"audit", "verify"}, env, nil, &out, &errOut); err != nil {
		t.Fatalf("verify: %v %s%s", err, out.String(), errOut.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) == 0 {
		t.Errorf("TOOLD_STATE_DIR ignored: nothing in %s", dir)
	}
	if _, err := os.Stat(filepath.Join(home, "toold")); err == nil {
		t.Error("the audit opened the default store instead of TOOLD_STATE_DIR's")
	}
}

// TestAuditLeavesTheStoreAsItIs: `toold audit verify` and `export` only
// read. Run with a configuration other than the replicas' (here the
// built-in one), they used to create or update every bucket and stream
// with that configuration's limits and replica count: against a cluster
// whose streams keep three copies, a verify without state.nats.replicas
// asked to scale them down to one (and a verify against limits the
// server could not hold failed before reading anything).
func TestAuditLeavesTheStoreAsItIs(t *testing.T) {
	ns := statetest.StartServer(t)
	const limit = 8 << 20
	st, err := state.Open(context.Background(), state.Options{URL: ns.URL, Name: "replica", EventsMaxBytes: limit, AuditMaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, cmd := range [][]string{{"verify"}, {"export", "-o", filepath.Join(t.TempDir(), "audit.jsonl")}} {
		var out bytes.Buffer
		args := append([]string{"audit", cmd[0], "-nats-url", ns.URL}, cmd[1:]...)
		if err := run(context.Background(), args, func(string) (string, bool) { return "", false }, nil, &out, &out); err != nil {
			t.Fatalf("audit %s: %v %s", cmd[0], err, out.String())
		}
	}
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, name := range []string{state.AuditStream, state.EventsStream} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.MaxBytes; got != limit {
			t.Errorf("%s: max bytes %d after the audit command, want %d as the replicas made it", name, got, limit)
		}
	}
}
