package events

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
)

// FuzzEventJSON holds the flusher's hand-written appenders to
// encoding/json with every field of an Event and of a Record filled from
// the fuzzer's input (any bytes, invalid UTF-8 and control characters
// included): each must decode to the value encoding/json writes. An
// event written for the activity stream (full false) leaves out the
// envelope, which only an execution's own subscribers get.
func FuzzEventJSON(f *testing.F) {
	f.Add("r\"a", "echo", "u\u2028é\xff", "<x> & y", `{"a":[1]}`, 1.25, int64(1764230400123456789), uint64(7), true)
	f.Add("", "", "", "", "", 0.0, int64(0), uint64(0), false)
	f.Add("\x01", "t", "\n", "\\", "not json", 1e21, int64(-1), uint64(math.MaxUint64), true)
	f.Fuzz(func(t *testing.T, s1, s2, s3, s4, envelope string, dur float64, nanos int64, seq uint64, flag bool) {
		if math.IsNaN(dur) || math.IsInf(dur, 0) {
			t.Skip("a duration no call can take")
		}
		at := time.Unix(0, nanos).UTC()
		// Events and records leave out a token's tool narrowing (only the
		// caller and its executions need it): the reference holds none.
		var who, shown *auth.Identity
		if flag {
			who = &auth.Identity{Kind: s1, Name: s2, Issuer: s3, Subject: s4, Client: s1, Actor: s2, Narrowed: true, Narrow: []string{s3}}
			plain := *who
			plain.Narrowed, plain.Narrow = false, nil
			shown = &plain
		}
		env, _ := json.Marshal(envelope)
		if json.Valid([]byte(envelope)) {
			var c bytes.Buffer
			_ = json.Compact(&c, []byte(envelope))
			env = c.Bytes()
		}
		r := &Recorder{replica: s4}
		it := item{typ: s1, at: at, requestID: s2, tool: s3, caller: s4, who: who, execution: s1, status: s2,
			errType: s3, errCode: s4, durationMS: dur, extra: &itemExtra{stream: s1, chunk: s3, envelope: env}}
		want := Event{Type: s1, Time: at, Replica: s4, RequestID: s2, Tool: s3, Caller: s4, Principal: shown, ExecutionID: s1,
			Status: s2, ErrorType: s3, ErrorCode: s4, DurationMS: dur, Stream: s1, Chunk: s3, Envelope: env}
		same(t, 0, want, r.appendEvent(nil, &it, true))
		want.Envelope = nil
		same(t, 1, want, r.appendEvent(nil, &it, false))
		rec := Record{Seq: seq, Time: at, Replica: s1, Kind: s2, Caller: s3, Principal: shown, Action: s4, Tool: s1,
			ArgsSHA256: s2, Status: s3, ErrorType: s4, DurationMS: dur, RequestID: s1, ExecutionID: s2, Target: s3, RecoveredFrom: s1, Prev: s4}
		rec.Principal = who
		// prev is written on a block's sealed line, even empty (the first
		// block's); encoding/json leaves an empty one out.
		written := appendRecord(nil, &rec, rec.Prev != "")
		rec.Principal = shown
		same(t, 2, rec, written)
	})
}
