package events_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// auditLog reads the audit log of st, line by line.
func auditLog(t *testing.T, st *state.Store) [][]byte {
	t.Helper()
	var lines [][]byte
	err := events.ReadAudit(context.Background(), st, events.ID{}, func(_ events.ID, line []byte) bool {
		lines = append(lines, append([]byte{}, line...))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// rewriteAudit does what a client of the store can do to the audit log,
// whose messages cannot be deleted: make the stream anew, holding edit's
// lines, one message each.
func rewriteAudit(t *testing.T, st *state.Store, edit func([][]byte) [][]byte) {
	t.Helper()
	statetest.ReplaceStream(t, st, state.AuditStream, state.AuditSubject, edit(auditLog(t, st)))
}

// reseal chains lines again after edit changed them, with SHA-256 as toold
// does: every hash and every link right. keepSig keeps the signature
// fields of signed lines (their signatures now sign other hashes); signer,
// when set, signs each line with the attacker's own key instead.
func reseal(t *testing.T, lines [][]byte, edit func(i int, rec *events.Record), keepSig bool, signer *events.Signer) [][]byte {
	t.Helper()
	prev := ""
	var out [][]byte
	for i, line := range lines {
		var rec events.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		edit(i, &rec)
		sig := rec
		rec.Prev, rec.Hash, rec.SignedFrom, rec.KeyID, rec.Sig = prev, "", 0, "", ""
		body, _ := json.Marshal(rec)
		sum := sha256.Sum256(body)
		prev = hex.EncodeToString(sum[:])
		tail := `,"hash":"` + prev + `"`
		switch {
		case signer != nil:
			tail += `,"signed_from":` + jsonNumber(rec.Seq) + `,"kid":"` + signer.KeyID() + `","sig":"` + events.SignForTest(signer, sum, rec.Seq, rec.V) + `"`
		case keepSig && sig.Sig != "":
			tail += `,"signed_from":` + jsonNumber(sig.SignedFrom) + `,"kid":"` + sig.KeyID + `","sig":"` + sig.Sig + `"`
		}
		out = append(out, append(body[:len(body)-1], []byte(tail+"}")...))
	}
	return out
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// writeLog makes n calls, each flushed into a message of its own.
func writeLog(t *testing.T, st *state.Store, n int) {
	t.Helper()
	for i := range n {
		r := newReplica(t, st)
		r.call("k"+jsonNumber(uint64(i)), `{"message":"x"}`)
		r.rec.Close()
	}
}

// TestResealIsFound: the attack of finding 5 of issue 16, in every form a
// writer of the store can try without the key: re-chain after an edit and
// drop the signatures, keep them, sign with a key of its own, or insert a
// record between two appends. Each fails verification; the intact log
// passes.
func TestResealIsFound(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	writeLog(t, st, 4)
	lines := auditLog(t, st)
	intact := bytes.Join(lines, []byte("\n"))
	if v, _ := events.VerifyFile(bytes.NewReader(intact), trusted); !v.OK() || v.Signed != 4 {
		t.Fatalf("the intact log: %+v", v)
	}
	edit := func(i int, rec *events.Record) {
		if i == 1 {
			rec.Caller = "someone-else"
		}
	}
	inserted := func() [][]byte {
		extra := events.Record{Seq: 3, Time: time.Now().UTC(), Replica: "r", Kind: "admin", Caller: "intruder", Action: "approve"}
		var recs [][]byte
		for i, l := range lines {
			recs = append(recs, l)
			if i == 1 {
				b, _ := json.Marshal(extra)
				recs = append(recs, b)
			}
		}
		return reseal(t, recs, func(i int, rec *events.Record) { rec.Seq = uint64(i + 1) }, true, nil)
	}
	tests := []struct {
		name  string
		lines [][]byte
		want  string
	}{
		{"signatures dropped", reseal(t, lines, edit, false, nil), "not signed"},
		{"signatures kept", reseal(t, lines, edit, true, nil), "does not match"},
		{"signed with another key", reseal(t, lines, edit, false, events.GenerateSigner()), "not given"},
		{"a record inserted", inserted(), "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := events.VerifyFile(bytes.NewReader(bytes.Join(tt.lines, []byte("\n"))), trusted)
			if err != nil {
				t.Fatal(err)
			}
			if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), tt.want) {
				t.Errorf("problems %q, want %q", v.Problems, tt.want)
			}
		})
	}
	// And in the store, as `toold audit verify` reads it.
	rewriteAudit(t, st, func([][]byte) [][]byte { return tests[0].lines })
	if v, err := events.Verify(context.Background(), st, trusted); err != nil || v.OK() {
		t.Errorf("a re-sealed log in the store: %+v %v", v, err)
	}
}

// TestUnsignedRecordBeforeAnAppend: a record a writer of the store appends
// between two of toold's appends is chained over by the next append (the
// replica loads the tail it finds), but that append's signature vouches
// only for its own records: the inserted one is reported.
func TestUnsignedRecordBeforeAnAppend(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	writeLog(t, st, 2)
	lines := auditLog(t, st)
	var head events.Record
	json.Unmarshal(lines[len(lines)-1], &head)
	rec := events.Record{Seq: 3, Time: time.Now().UTC(), Replica: "r", Kind: "admin", Caller: "intruder", Action: "approve", Prev: head.Hash}
	body, _ := json.Marshal(rec)
	sum := sha256.Sum256(body)
	line := append(body[:len(body)-1], []byte(`,"hash":"`+hex.EncodeToString(sum[:])+`"}`)...)
	if _, err := st.JetStream().Publish(context.Background(), state.AuditSubject, line); err != nil {
		t.Fatal(err)
	}
	writeLog(t, st, 1)
	v, err := events.Verify(context.Background(), st, trusted)
	if err != nil || v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "records 3 to 3 are not signed") {
		t.Errorf("verify: %+v %v", v, err)
	}
}

// TestCheckpointFindsTruncation: a log cut after a checkpoint is still
// validly signed, but verify given the checkpoint finds it: first as
// records missing from its end, then, once toold has appended past the
// checkpoint again, as a record that does not match it.
func TestCheckpointFindsTruncation(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st)
	for i := range 5 {
		r.call("k"+jsonNumber(uint64(i)), `{"message":"x"}`)
		r.waitAppended(t, i+1) // before the next call: several appends
	}
	r.rec.Close()
	cp, ok := r.rec.AuditHead()
	if !ok || cp.Seq != 5 {
		t.Fatalf("the head: %+v %v", cp, ok)
	}
	short := cp
	short.Head = cp.Head[:events.MinCheckpointDigits] // as the metric gives it
	for _, c := range []events.Checkpoint{cp, short} {
		opts := trusted
		opts.Checkpoints = []events.Checkpoint{c}
		if v, err := events.Verify(context.Background(), st, opts); err != nil || !v.OK() || v.Checkpoints != 1 {
			t.Fatalf("the intact log against %s: %+v %v", c, v, err)
		}
	}
	opts := trusted
	opts.Checkpoints = []events.Checkpoint{cp}
	rewriteAudit(t, st, func(l [][]byte) [][]byte { return l[:3] })
	v, err := events.Verify(context.Background(), st, opts)
	if err != nil || v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "removed from its end") {
		t.Errorf("truncated: %+v %v", v, err)
	}
	if v2, _ := events.Verify(context.Background(), st, trusted); !v2.OK() {
		t.Errorf("without the checkpoint the cut log should look whole (that is why checkpoints exist): %+v", v2)
	}
	writeLog(t, st, 3) // records 4 to 6 again, new ones
	v, err = events.Verify(context.Background(), st, opts)
	if err != nil || v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "does not match the checkpoint") {
		t.Errorf("rewritten past the checkpoint: %+v %v", v, err)
	}
}

// TestCheckpointer: each checkpoint goes to the log, the metrics and the
// file, and what each of them says verifies the log.
func TestCheckpointer(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st)
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	file := filepath.Join(t.TempDir(), "checkpoints.jsonl")
	cp, err := events.NewCheckpointer(events.CheckpointOptions{Head: r.rec.AuditHead, Interval: 10 * time.Millisecond, File: file,
		Logger: zap.New(core), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	go cp.Run()
	r.call("a", `{"message":"x"}`)
	// A checkpoint of the first record before the second call: the last
	// checkpoint, at Close, is not the only one.
	first := func() bool {
		for _, e := range logs.FilterMessage("audit checkpoint").All() {
			if c, _ := e.ContextMap()["checkpoint"].(string); strings.HasPrefix(c, "1:") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for !first() {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint logged after the first record")
		}
		time.Sleep(time.Millisecond)
	}
	r.call("b", `{"message":"y"}`)
	r.rec.Close()
	cp.Close()

	head, _ := r.rec.AuditHead()
	entries := logs.FilterMessage("audit checkpoint").All()
	if len(entries) == 0 {
		t.Fatal("no checkpoint logged")
	}
	logged := entries[len(entries)-1].ContextMap()["checkpoint"].(string)
	data, _ := os.ReadFile(file)
	fileLines := strings.Split(strings.TrimSpace(string(data)), "\n")
	seq, h48 := uint64(gauge(t, reg, "toold_audit_checkpoint_seq")), uint64(gauge(t, reg, "toold_audit_checkpoint_head48"))
	metric := fmt.Sprintf("%d:%012x", seq, h48)
	for name, text := range map[string]string{"log": logged, "file": fileLines[len(fileLines)-1], "metric": metric} {
		c, err := events.ParseCheckpoint(text)
		if err != nil || c.Seq != head.Seq || !strings.HasPrefix(head.Head, c.Head) {
			t.Errorf("the %s's checkpoint %q: %+v %v, want %s", name, text, c, err, head)
			continue
		}
		opts := trusted
		opts.Checkpoints = []events.Checkpoint{c}
		if v, err := events.Verify(context.Background(), st, opts); err != nil || !v.OK() || v.Checkpoints != 1 {
			t.Errorf("verify against the %s's checkpoint: %+v %v", name, v, err)
		}
	}
}

// waitAppended waits (10 s at most) until the replica's recorder has
// appended n audit records (toold_audit_records_total).
func (r *replica) waitAppended(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mfs, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "toold_audit_records_total" && mf.GetMetric()[0].GetCounter().GetValue() >= float64(n) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit records never appended", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// gauge is the value of a gauge without labels.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestParseCheckpoint(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"12:" + h, true}, {"12:" + h[:12], true}, {`{"seq":12,"head":"` + h + `","time":"2026-01-01T00:00:00Z"}`, true},
		{"12:" + h[:11], false}, {"12:" + h + "a", false}, {"0:" + h, false}, {"-1:" + h, false}, {"12:" + strings.ToUpper(h), false},
		{"12:" + h[:12] + "xy", false}, {"12" + h, false}, {`{"seq":1}`, false}, {"", false}, {strings.Repeat("1", 600), false},
	} {
		if _, err := events.ParseCheckpoint(tt.in); (err == nil) != tt.ok {
			t.Errorf("ParseCheckpoint(%.40q): %v", tt.in, err)
		}
	}
}

func FuzzParseCheckpoint(f *testing.F) {
	for _, s := range []string{"1:" + strings.Repeat("0", 64), "5:abcdef012345", `{"seq":3,"head":"abcdef0123456"}`, "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := events.ParseCheckpoint(s)
		if err != nil {
			return
		}
		back, err := events.ParseCheckpoint(c.String())
		if err != nil || back.Seq != c.Seq || back.Head != c.Head {
			t.Errorf("%q -> %v -> %v %v", s, c, back, err)
		}
	})
}
