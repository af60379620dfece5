package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// auditRun starts toold on dir, makes calls calls (each flushed on its
// own), and stops it.
func auditRun(t *testing.T, dir string, calls int, args ...string) {
	t.Helper()
	in := start(t, nil, append([]string{"-workspace", workspace(t), "-state-dir", dir}, args...)...)
	for i := range calls {
		if code, _ := in.exec("read_file", `{"paths":["hello.txt"]}`); code != 200 {
			t.Fatalf("read_file: %d", code)
		}
		in.waitAudited(t, i+1) // appended before the next: records in messages of their own
	}
	if err := in.shutdown(); err != nil {
		t.Fatal(err)
	}
}

// auditLines reads the audit log of the store in dir, line by line.
func auditLines(t *testing.T, dir string) [][]byte {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var lines [][]byte
	err = events.ReadAudit(context.Background(), st, events.ID{}, func(_ events.ID, line []byte) bool {
		lines = append(lines, append([]byte{}, line...))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// reseal is the attack of finding 5: it rewrites each line with edit,
// drops whatever it cannot recompute, and chains the lines again with
// SHA-256 as toold did, so every hash and every link is right.
func reseal(t *testing.T, lines [][]byte, edit func(i int, rec map[string]json.RawMessage)) [][]byte {
	t.Helper()
	prev := ""
	var out [][]byte
	for i, line := range lines {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"hash", "sig", "kid", "signed_from"} {
			delete(rec, k)
		}
		edit(i, rec)
		rec["prev"], _ = json.Marshal(prev)
		body, _ := json.Marshal(rec)
		sum := sha256.Sum256(body)
		prev = hex.EncodeToString(sum[:])
		out = append(out, append(body[:len(body)-1], []byte(`,"hash":"`+prev+`"}`)...))
	}
	return out
}

// rewriteAudit replaces the audit stream of the store in dir with lines,
// as a client of the store can.
func rewriteAudit(t *testing.T, dir string, lines [][]byte) {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	statetest.ReplaceStream(t, st, state.AuditStream, state.AuditSubject, lines)
}

// verifyStore runs `toold audit verify` on the store in dir.
func verifyStore(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"audit", "verify", "-state-dir", dir}, args...),
		func(string) (string, bool) { return "", false }, nil, &out, &errOut)
	return out.String() + errOut.String(), err
}

// TestAuditResealIsFound is finding 5 of issue 16: a writer of the store
// edited a record and recomputed the SHA-256 chain, and `toold audit
// verify` passed. The chain is now signed with a key that is not in the
// store: a re-sealed log fails.
func TestAuditResealIsFound(t *testing.T) {
	dir := t.TempDir()
	auditRun(t, dir, 4)
	if out, err := verifyStore(t, dir); err != nil {
		t.Fatalf("the intact log: %v\n%s", err, out)
	}
	lines := auditLines(t, dir)
	if len(lines) != 4 {
		t.Fatalf("%d records, want 4", len(lines))
	}
	forged := reseal(t, lines, func(i int, rec map[string]json.RawMessage) {
		if i == 1 {
			rec["caller"] = json.RawMessage(`"someone-else"`)
		}
	})
	rewriteAudit(t, dir, forged)
	out, err := verifyStore(t, dir)
	if err == nil || !strings.Contains(out, "PROBLEM") {
		t.Errorf("a re-sealed audit log passed verification: %v\n%s", err, out)
	}
}

// TestVerifyAgainstCheckpoints: toold publishes checkpoints to its log and
// to state.audit.checkpoint_file; `toold audit verify` given either passes
// on the intact log, and fails once the log is cut after the checkpoint
// (a cut log is still validly signed: only the checkpoint shows it).
func TestVerifyAgainstCheckpoints(t *testing.T) {
	dir := t.TempDir()
	cpFile := filepath.Join(t.TempDir(), "checkpoints.jsonl")
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	os.WriteFile(cfg, []byte("state: {audit: {checkpoint_interval: 20ms, checkpoint_file: "+cpFile+"}}\n"), 0o600)
	in := start(t, nil, "-workspace", workspace(t), "-state-dir", dir, "-config", cfg)
	for i := range 4 {
		in.exec("read_file", `{"paths":["hello.txt"]}`)
		// Appended (and so under a checkpoint, every 20ms) before the next.
		in.waitAudited(t, i+1)
	}
	if err := in.shutdown(); err != nil {
		t.Fatal(err)
	}
	logged := lastCheckpointLogged(t, in.stderr.String()+in.stdout.String())
	for _, args := range [][]string{{"-checkpoint-file", cpFile}, {"-checkpoint", logged}} {
		if out, err := verifyStore(t, dir, args...); err != nil || !strings.Contains(out, "checkpoint(s) matched") {
			t.Fatalf("the intact log against %v: %v\n%s", args, err, out)
		}
	}
	lines := auditLines(t, dir)
	rewriteAudit(t, dir, lines[:2])
	if out, err := verifyStore(t, dir); err != nil {
		t.Errorf("the cut log without a checkpoint should pass (it is validly signed): %v\n%s", err, out)
	}
	for _, args := range [][]string{{"-checkpoint-file", cpFile}, {"-checkpoint", logged}} {
		if out, err := verifyStore(t, dir, args...); err == nil || !strings.Contains(out, "removed from its end") {
			t.Errorf("the cut log against %v: %v\n%s", args, err, out)
		}
	}
}

// lastCheckpointLogged finds the last "audit checkpoint" log line's
// checkpoint field.
func lastCheckpointLogged(t *testing.T, logs string) string {
	t.Helper()
	last := ""
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"audit checkpoint"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `"checkpoint":"`)
		last, _, _ = strings.Cut(rest, `"`)
	}
	if last == "" {
		t.Fatalf("no checkpoint in the log:\n%s", logs)
	}
	return last
}
