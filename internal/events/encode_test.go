package events

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/auth"
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
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%d: (-encoding/json +appender):\n%s", i, diff)
	}
}
