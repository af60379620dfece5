package events

import (
	"cmp"
	"encoding/json"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/encodetest"
)

// TestAppendersMatchEncodingJSON: the hand-written encodings decode to the
// same values encoding/json writes for Event and Record.
func TestAppendersMatchEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	r := &Recorder{replica: "replica \"a\""}
	who := &auth.Identity{Kind: auth.KindToken, Name: "u\"1@https://idp.test/", Issuer: "https://idp.test/", Subject: "u\"1", Client: "agent", Actor: "b"}
	items := []item{
		{typ: TypeEnd, at: at, requestID: "r0", tool: "echo", caller: who.Name, who: who, status: "success"},
		{typ: TypeStart, at: at, requestID: "r1", tool: "echo", caller: "k\n<x>", execution: "e"},
		{typ: TypeError, at: at, requestID: "r", tool: "t", caller: "c", status: "rejected", errType: "validation_error", errCode: "x", durationMS: 1.25},
		{typ: TypeOutput, at: at, extra: &itemExtra{stream: "stdout", chunk: "line\u2028\x01é", envelope: json.RawMessage(`{"a":1}`)}},
		{typ: TypeEnd, at: at, requestID: "r2", tool: "echo", caller: "c", status: "success", durationMS: 0.5, started: at.Add(-time.Millisecond)},
	}
	for i, it := range items {
		want := Event{Type: it.typ, Time: it.at, Replica: r.replica, RequestID: it.requestID, Tool: it.tool, Caller: it.caller,
			Principal: it.who, ExecutionID: it.execution, Status: it.status, ErrorType: it.errType, ErrorCode: it.errCode, DurationMS: it.durationMS}
		if it.extra != nil {
			want.Stream, want.Chunk, want.Envelope = it.extra.stream, it.extra.chunk, it.extra.envelope
		}
		same(t, i, want, r.appendEvent(nil, &items[i], true)) // an execution's subject: never coalesced
		if !it.started.IsZero() {
			want.Started, want.Coalesced = it.started, true
		}
		want.Envelope = nil
		same(t, i, want, r.appendEvent(nil, &items[i], false))
	}
	for i, rec := range []Record{
		{Seq: 1, Time: at, Replica: "a", Kind: "call", Caller: "k", Action: "execute", Tool: "echo", ArgsSHA256: "ab", Status: "success", DurationMS: 0.5, RequestID: "r", Prev: "00"},
		{Seq: 2, Time: at, Replica: "a", Kind: "admin", Caller: who.Name, Principal: who, Action: "approve", Target: "x", Prev: "ab"},
		{Seq: 18446744073709551615, Time: at, Replica: "b", Kind: "admin", Caller: "\"q\"", Action: "read_audit", Target: "1.2", Prev: "ff"},
		{V: 2, Seq: 7, Time: at, Replica: "c", Kind: "call", Caller: "k", Action: "execute", Tool: "echo", Status: "success", Prev: "ab"},
		{V: 2, Seq: 8, Time: at, Replica: "c", Kind: "call", Caller: "k", Action: "execute", Tool: "echo", ArgsSHA256: "cd", Status: "error",
			ErrorType: "timeout", ExecutionID: "e", RecoveredFrom: "\"b\"", Prev: "ab"},
	} {
		same(t, i, rec, appendRecord(nil, &rec, true))
	}
}

func same[T any](t *testing.T, i int, want T, got []byte) {
	t.Helper()
	ref, _ := json.Marshal(want)
	var w, g any
	json.Unmarshal(ref, &w)
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%d: invalid JSON %s: %v", i, got, err)
	}
	if diff := gocmp.Diff(w, g); diff != "" {
		t.Errorf("%d: (-encoding/json +appender):\n%s", i, diff)
	}
}

// TestAppendersEveryField (issue 38, item 7): appendEvent and
// appendRecord (with appendSeal) write what encoding/json writes for an
// Event and a Record with every field filled by reflection, each field
// alone, and every field but one — so a field added to either fails here
// until the appender writes it. itemOf is the one place an Event's fields
// meet the recorder's item: a new field must be carried there too.
func TestAppendersEveryField(t *testing.T) {
	// ID is the position a reader gives an event it read from the stream;
	// the recorder never writes it. A principal's tool narrowing and a
	// token's groups are the caller's and its executions', never an
	// event's or a record's (auth.Identity.AppendJSON without narrow).
	narrowing := []string{"Principal.Narrowed", "Principal.Narrow", "Principal.Groups"}
	for _, v := range encodetest.Variants[Event](t, append(narrowing, "ID")...) {
		ev := *v.Value
		r := &Recorder{replica: ev.Replica}
		it := itemOf(ev)
		full := ev // an execution's subject: the envelope, never coalesced
		full.Started, full.Coalesced = time.Time{}, false
		encodetest.Same(t, v.Name+" (execution)", mustJSON(t, full), r.appendEvent(nil, &it, true))
		activity := ev // the activity stream: no envelope; coalesced with its start
		activity.Envelope, activity.Coalesced = nil, !ev.Started.IsZero()
		encodetest.Same(t, v.Name+" (activity)", mustJSON(t, activity), r.appendEvent(nil, &it, false))
	}
	for _, v := range encodetest.Variants[Record](t, narrowing...) {
		rec := *v.Value
		// A sealed record always has its hash, and a signature's three
		// parts go together.
		if rec.Hash == "" {
			rec.Hash = "ab"
		}
		if rec.signed() {
			rec.SignedFrom, rec.KeyID, rec.Sig = max(rec.SignedFrom, 1), cmp.Or(rec.KeyID, "k"), cmp.Or(rec.Sig, "s")
		}
		// Whether prev is written is the chain's call (every format 1
		// record, a block's last); here: when there is one.
		line := appendRecord(nil, &rec, rec.Prev != "")
		line = appendSeal(line[:len(line)-1], &rec)
		encodetest.Same(t, v.Name, mustJSON(t, rec), line)
	}
}

// itemOf is the recorder's item an event is written from.
func itemOf(ev Event) item {
	it := item{typ: ev.Type, at: ev.Time, requestID: ev.RequestID, tool: ev.Tool, caller: ev.Caller, who: ev.Principal,
		execution: ev.ExecutionID, status: ev.Status, errType: ev.ErrorType, errCode: ev.ErrorCode, durationMS: ev.DurationMS,
		started: ev.Started}
	if ev.Stream != "" || ev.Chunk != "" || len(ev.Envelope) > 0 {
		it.extra = &itemExtra{stream: ev.Stream, chunk: ev.Chunk, envelope: ev.Envelope}
	}
	return it
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
