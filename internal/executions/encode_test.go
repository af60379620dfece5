package executions

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/encodetest"
	"github.com/toold/toold/internal/tracing"
)

// TestEncodeIsEncodingJSON: a record's encoding is encoding/json's, byte
// for byte, whether it is written directly (the plain shapes) or left to
// encoding/json — so stored records, and the byte comparisons made of
// them (a write found landed, a recovery's field search), are as before.
func TestEncodeIsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 54, 12, 123456789, time.UTC)
	env := (&dispatch.Envelope{RequestID: "r", Tool: "echo", Status: dispatch.StatusSuccess, Success: true,
		Data: json.RawMessage(`{"message":"hello","n":1}`), DurationMS: 0.2}).AppendJSON(nil)
	plain := func() *Record {
		return &Record{ID: "01a21c437547f0c40dc75d15", Caller: "agent", Kind: "call", Tool: "echo", RequestID: "abc",
			Status: dispatch.StatusSuccess, Envelope: env, Replica: "a", Attempt: 1, CreatedAt: at, StartedAt: at, UpdatedAt: at}
	}
	for _, tt := range []struct {
		name  string
		edit  func(*Record)
		plain bool // written directly
	}{
		{"a quick call's end", func(*Record) {}, true},
		{"a quick call's end, quiet", func(r *Record) { r.Quiet = true }, true},
		{"written before its audit record", func(r *Record) { r.AuditAfter, r.ArgsSHA256 = true, "5ede4b80" }, true},
		{"pending, with arguments", func(r *Record) {
			r.Status, r.Envelope, r.Arguments, r.StartedAt, r.Attempt = dispatch.StatusPending, nil, json.RawMessage(`{"message":"a b","x":[1,"\""]}`), time.Time{}, 0
		}, true},
		{"every plain field", func(r *Record) {
			r.CalledAs, r.TimeoutMS, r.ConfirmToken, r.CancelRequested, r.Step, r.Confirmed = "echo2", 1500, "tok", true, 3, true
			r.Trace = tracing.Carrier{"traceparent": "00-abc-def-01", "b": "c"}
		}, true},
		{"no tool, zero times", func(r *Record) {
			r.Tool, r.CreatedAt, r.UpdatedAt, r.StartedAt = "", time.Time{}, time.Time{}, time.Time{}
		}, true},
		{"a time zone", func(r *Record) { r.CreatedAt = at.In(time.FixedZone("x", 3600)) }, true},
		{"arguments with spaces", func(r *Record) { r.Arguments = json.RawMessage(`{"a": 1}`) }, false},
		{"arguments with <", func(r *Record) { r.Arguments = json.RawMessage(`{"a":"<b>"}`) }, false},
		{"arguments with U+2028", func(r *Record) { r.Arguments = json.RawMessage("{\"a\":\"\u2028\"}") }, false},
		{"an envelope with &", func(r *Record) { r.Envelope = json.RawMessage(`{"a":"x&y"}`) }, false},
		{"a caller with a quote", func(r *Record) { r.Caller = `a"b` }, false},
		{"a caller beyond ASCII", func(r *Record) { r.Caller = "é" }, false},
		{"a request id with <", func(r *Record) { r.RequestID = "<x>" }, false},
		{"a trace value with &", func(r *Record) { r.Trace = tracing.Carrier{"traceparent": "a&b"} }, false},
		{"a principal", func(r *Record) { r.Principal = &auth.Identity{Kind: auth.KindToken, Name: "n", Subject: "s"} }, false},
		{"a wait", func(r *Record) {
			r.Wait = &Wait{For: "approval", Request: json.RawMessage(`{}`), Since: at, ExpiresAt: at}
		}, false},
		{"an approval", func(r *Record) { r.Approval = &Approval{Approved: true, By: "ops", At: at} }, false},
		{"a year past 9999", func(r *Record) { r.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := plain()
			tt.edit(r)
			_, plain := r.appendPlain(nil)
			if plain != tt.plain {
				t.Errorf("written directly: %v, want %v", plain, tt.plain)
			}
			want, err := json.Marshal(r)
			if err != nil {
				if r.UpdatedAt.Year() > 9999 {
					return // encoding/json refuses it; encode panics as it did
				}
				t.Fatal(err)
			}
			if got := r.encode(); !bytes.Equal(got, want) {
				t.Errorf("encode:\n%s\nencoding/json:\n%s", got, want)
			}
		})
	}
}

// TestEncodeRandomRecords: records with fields drawn from strings that
// stress escaping, the same bytes as encoding/json's every time.
func TestEncodeRandomRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	strs := []string{"", "a", "echo", "a.b_c-d", "x y", "01a21c437547f0c40dc75d15"}
	odd := []string{"<", ">", "&", `"`, `\`, "\x01", "\x7f", "é", "\u2028", "a<b"}
	raws := []string{"", `{}`, `{"a":1}`, `{"a": 1}`, `{"a":"<"}`, `{"a":"\""}`, `[1,2]`, `"x"`, "{\"a\":\"\u2029\"}", `{"a":"b c"}`, `null`}
	pick := func() string { // mostly plain, so both paths are taken
		if rng.IntN(20) == 0 {
			return odd[rng.IntN(len(odd))]
		}
		return strs[rng.IntN(len(strs))]
	}
	raw := func() json.RawMessage {
		if s := raws[rng.IntN(len(raws))]; s != "" {
			return json.RawMessage(s)
		}
		return nil
	}
	direct := 0
	for i := range 5000 {
		r := &Record{ID: pick(), Caller: pick(), Kind: pick(), Tool: pick(), CalledAs: pick(), Arguments: raw(), AuditAfter: rng.IntN(2) == 0,
			ArgsSHA256: pick(), TimeoutMS: int64(rng.IntN(3)) * 1000, ConfirmToken: pick(), RequestID: pick(), Status: dispatch.Status(pick()),
			Envelope: raw(), Quiet: rng.IntN(2) == 0, Replica: pick(), Attempt: rng.IntN(3), CancelRequested: rng.IntN(2) == 0, Step: rng.IntN(3) - 1, Confirmed: rng.IntN(2) == 0,
			CreatedAt: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC(), UpdatedAt: time.Unix(rng.Int64N(4e9), 0)}
		if rng.IntN(2) == 0 {
			r.StartedAt = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))
		}
		if rng.IntN(3) == 0 {
			r.Trace = tracing.Carrier{pick(): pick(), "traceparent": pick()}
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.encode(); !bytes.Equal(got, want) {
			t.Fatalf("record %d:\nencode:        %s\nencoding/json: %s", i, got, want)
		}
		if _, ok := r.appendPlain(nil); ok {
			direct++
		}
	}
	if direct < 500 || direct > 4500 {
		t.Errorf("%d of 5000 records written directly: the test should take both paths often", direct)
	}
}

func BenchmarkEncode(b *testing.B) {
	env := (&dispatch.Envelope{RequestID: "r", Tool: "echo", Status: dispatch.StatusSuccess, Success: true,
		Data: json.RawMessage(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]},"length":12}`), DurationMS: 0.2}).AppendJSON(nil)
	now := time.Now().UTC()
	r := &Record{ID: "01a21c437547f0c40dc75d15", Caller: "agent", Kind: "call", Tool: "echo", RequestID: "abc", Status: dispatch.StatusSuccess,
		Envelope: env, Replica: "a", Attempt: 1, CreatedAt: now, StartedAt: now, UpdatedAt: now, AuditAfter: true,
		ArgsSHA256: "5ede4b802644738be204d8396acbe8f58f08f4a52ca580361ccdc4b9d25d86eb"}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.encode()
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}

// TestAppendWorkIsMarshal: a work message written directly is the one
// encoding/json writes for a plain key, and decodes to the same work for
// any key.
func TestAppendWorkIsMarshal(t *testing.T) {
	body := (&Record{ID: "0190a1b2c3d4e5f6a7b8c9d0", Caller: "k", Kind: "call", Tool: "echo", Arguments: json.RawMessage(`{"message":"hi"}`),
		Status: "pending", Step: 1}).encode()
	for _, c := range []struct {
		key  string
		rev  uint64
		body []byte
		step int
	}{
		{recordKey("k", "0190a1b2c3d4e5f6a7b8c9d0"), 7, body, 1},
		{recordKey("k", "0190a1b2c3d4e5f6a7b8c9d0"), 0, body, 0},
		{"k.x", 1 << 60, body, 3},
		{"quote\" <and> \\ \u2028 é", 2, body, 2},
	} {
		got := appendWork(nil, c.key, c.rev, c.body, c.step)
		want, err := json.Marshal(work{Key: c.key, Revision: c.rev, Record: c.body, Step: c.step})
		if err != nil {
			t.Fatal(err)
		}
		if plainString(c.key) && !bytes.Equal(got, want) {
			t.Errorf("appendWork = %s\njson.Marshal = %s", got, want)
		}
		var g, w work
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		_ = json.Unmarshal(want, &w)
		if g.Key != w.Key || g.Revision != w.Revision || g.Step != w.Step || !bytes.Equal(g.Record, w.Record) {
			t.Errorf("decoded %+v, want %+v", g, w)
		}
	}
}

// TestEncodeEveryField (issue 38, item 7): a record's encoding is
// encoding/json's, byte for byte, for a record with every field filled by
// reflection, each field alone, and every field but one; and the direct
// path (appendPlain), given as many of those fields as it takes, writes
// them as encoding/json does. A field added to Record (or to a type it
// holds) fails here until the direct path writes it or declines records
// that have it.
func TestEncodeEveryField(t *testing.T) {
	for _, v := range encodetest.Variants[Record](t) {
		want, err := json.Marshal(v.Value)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if got := v.Value.encode(); !bytes.Equal(got, want) {
			t.Errorf("%s:\nencode:        %s\nencoding/json: %s", v.Name, got, want)
		}
	}
	leaves := encodetest.Leaves(t, reflect.TypeFor[Record]())
	with := func(fields []encodetest.Field) *Record {
		r := new(Record)
		for i, f := range fields {
			f.Set(reflect.ValueOf(r), i)
		}
		return r
	}
	var plain []encodetest.Field
	for _, f := range leaves {
		r := with(append(slices.Clone(plain), f))
		got, ok := r.appendPlain(nil)
		if !ok {
			continue
		}
		plain = append(plain, f)
		if want, _ := json.Marshal(r); !bytes.Equal(got, want) {
			t.Errorf("written directly with %s:\nappendPlain:   %s\nencoding/json: %s", f.Path, got, want)
		}
	}
	if len(plain) < 20 {
		t.Errorf("the direct path took %d fields: %v", len(plain), plain)
	}
}
