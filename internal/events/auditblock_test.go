package events_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state/statetest"
)

// format1Key is the public key of testdata/audit-v1.jsonl: six format 1
// records in three signed appends, as toold wrote them before format 2.
const format1Key = "ed25519:ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c"

func format1Log(t *testing.T) [][]byte {
	t.Helper()
	data, err := os.ReadFile("testdata/audit-v1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte("\n"))
}

// verifyLines checks lines as `toold audit verify -file` does.
func verifyLines(t *testing.T, lines [][]byte, keys ...string) *events.Verification {
	t.Helper()
	ring := events.NewKeyring(testSigner.PublicKey())
	for _, k := range keys {
		pub, err := events.ParsePublicKey([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		ring.Add(pub)
	}
	v, err := events.VerifyFile(bytes.NewReader(bytes.Join(lines, []byte("\n"))), events.VerifyOptions{Keys: ring})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// blockLog writes three appends of several calls each (one block each, in
// format 2) after the format 1 log, as a store upgraded from it holds.
func blockLog(t *testing.T) [][]byte {
	t.Helper()
	st := statetest.Open(t, nil, "a")
	statetest.ReplaceStream(t, st, "TOOLD_AUDIT", "toold.audit", format1Log(t))
	// No timed flush: Durable writes each round's records, one append.
	r := newReplicaFlushing(t, st, time.Hour)
	for round := range 3 {
		for i := range 4 {
			r.call("k"+jsonNumber(uint64(round*4+i)), `{"message":"x"}`)
		}
		if err := r.rec.Durable(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	r.rec.Close()
	return auditLog(t, st)
}

// TestFormat2Block: toold appends format 2 blocks, chained after the
// format 1 records a store already holds; the log verifies whole, and
// each block's records carry "v":2 with only its last sealed.
func TestFormat2Block(t *testing.T) {
	lines := blockLog(t)
	v := verifyLines(t, lines, format1Key)
	if !v.OK() || v.Records != 18 || v.First != 1 || v.Last != 18 {
		t.Fatalf("the upgraded log: %+v", v)
	}
	sealed, blocks := 0, 0
	for _, line := range lines[6:] {
		if !bytes.HasPrefix(line, []byte(`{"v":2,`)) {
			t.Fatalf("not a format 2 record: %s", line)
		}
		if bytes.Contains(line, []byte(`"hash":`)) {
			sealed++
		}
	}
	blocks = int(v.Signed) - 3 // the format 1 log's three signatures
	if sealed != 3 || blocks != 3 {
		t.Errorf("%d sealed lines, %d signed blocks, of 12 records", sealed, blocks)
	}
	if v := verifyLines(t, format1Log(t), format1Key); !v.OK() || v.Records != 6 || v.Signed != 3 {
		t.Errorf("the format 1 log alone: %+v", v)
	}
}

// resealBlocks re-chains format 2 lines after edit changed them, hashing
// each block as toold does; sign, when set, signs each block with that
// key (an attacker's), else the seals keep their old signatures.
func resealBlocks(t *testing.T, lines [][]byte, edit func(recs []events.Record) []events.Record, sign *events.Signer) [][]byte {
	t.Helper()
	var recs []events.Record
	for _, l := range lines {
		var r events.Record
		json.Unmarshal(l, &r)
		recs = append(recs, r)
	}
	recs = edit(recs)
	var out [][]byte
	prev := ""
	h := sha256.New()
	for i := range recs {
		r := recs[i]
		last := r.Hash != ""
		sig := r
		r.Prev, r.Hash, r.SignedFrom, r.KeyID, r.Sig = "", "", 0, "", ""
		if !last {
			b, _ := json.Marshal(r)
			h.Write(append(b, '\n'))
			out = append(out, b)
			continue
		}
		b, _ := json.Marshal(r)
		body := append(b[:len(b)-1], []byte(`,"prev":"`+prev+`"}`)...)
		h.Write(body)
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		h.Reset()
		prev = hex.EncodeToString(sum[:])
		tail := `,"hash":"` + prev + `"`
		if sign != nil {
			tail += `,"signed_from":` + jsonNumber(sig.SignedFrom) + `,"kid":"` + sign.KeyID() + `","sig":"` + events.SignForTest(sign, sum, sig.SignedFrom, 2) + `"`
		} else {
			tail += `,"signed_from":` + jsonNumber(sig.SignedFrom) + `,"kid":"` + sig.KeyID + `","sig":"` + sig.Sig + `"`
		}
		out = append(out, append(body[:len(body)-1], []byte(tail+"}")...))
	}
	return out
}

// TestFormat2FindsEveryChange: an edit of any record of a block, a record
// removed from a block or its seal removed, a whole block removed, a
// block re-sealed (its signatures kept, or signed with another key), and
// an edit of a format 1 record before the blocks: each is found.
func TestFormat2FindsEveryChange(t *testing.T) {
	lines := blockLog(t)
	v1, v2 := lines[:6], lines[6:]
	// The blocks' boundaries: the index of each sealed line in v2.
	var seals []int
	for i, l := range v2 {
		if bytes.Contains(l, []byte(`"hash":`)) {
			seals = append(seals, i)
		}
	}
	firstSeal := seals[0]
	// A block of two records or more, to cut the log inside (blockLog's
	// are four): a block of one record cut before its seal is a whole
	// block removed from the end, which only a checkpoint can tell.
	cutAt, start := -1, 0
	for _, s := range seals {
		if s > start {
			cutAt = s
			break
		}
		start = s + 1
	}
	if cutAt < 0 {
		t.Fatalf("every block holds one record (seals at %v): no block to cut inside", seals)
	}
	join := func(parts ...[][]byte) [][]byte {
		var out [][]byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	without := func(l [][]byte, i int) [][]byte { return join(l[:i:i], l[i+1:]) }
	edited := func(l [][]byte, i int) [][]byte {
		c := join(l)
		c[i] = bytes.Replace(c[i], []byte(`"caller":"`), []byte(`"caller":"x`), 1)
		return c
	}
	forged := func(r []events.Record) []events.Record { r[0].Caller = "someone-else"; return r }
	for _, tt := range []struct {
		name  string
		lines [][]byte
		want  string
	}{
		{"a record in a block edited", join(v1, edited(v2, 0)), "do not match their block's hash"},
		{"a block's seal edited", join(v1, edited(v2, firstSeal)), "altered"},
		{"a record removed from a block", join(v1, without(v2, 0)), "record 8 follows record 6: 1 record(s) removed"},
		{"a block's seal removed", join(v1, without(v2, firstSeal)), "removed"},
		{"the log cut before a block's seal", join(v1, v2[:cutAt]), "not sealed"},
		{"a whole block removed", join(v1, v2[firstSeal+1:]), "removed"},
		{"re-sealed, signatures kept", join(v1, resealBlocks(t, join(v2), forged, nil)), "does not match"},
		{"re-sealed, signed with another key", join(v1, resealBlocks(t, join(v2), forged, events.GenerateSigner())), "not given"},
		{"a format 1 record edited", join(edited(v1, 2), v2), "altered"},
		{"a format 1 record removed", join(without(v1, 5), v2), "record 7 follows record 5"},
		{"a format 1 record removed from the middle", join(without(v1, 2), v2), "record 4 follows record 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := verifyLines(t, tt.lines, format1Key)
			if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), tt.want) {
				t.Errorf("problems %q, want %q", v.Problems, tt.want)
			}
		})
	}
}

// TestFormat2InTheStore: verify reads blocks from the store as from an
// export, checkpoints included; a replica appends after a format 2 tail
// it loads (another replica's) without breaking the chain.
func TestFormat2InTheStore(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	for range 2 { // two replicas' recorders, one after the other
		r := newReplica(t, st)
		for i := range 3 {
			r.call("k"+jsonNumber(uint64(i)), `{"message":"x"}`)
		}
		r.rec.Close()
		head, _ := r.rec.AuditHead()
		opts := trusted
		opts.Checkpoints = []events.Checkpoint{head}
		v, err := events.Verify(context.Background(), st, opts)
		if err != nil || !v.OK() || v.Checkpoints != 1 || v.Head != head.Head {
			t.Fatalf("verify against %s: %+v %v", head, v, err)
		}
	}
}
