package strictjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{`{}`, map[string]any{}},
		{` {"a":[1,"x",true,null,{"b":-2.5e3}]} `, map[string]any{"a": []any{json.Number("1"), "x", true, nil, map[string]any{"b": json.Number("-2.5e3")}}}},
		{`"\u00e9\ud83d\ude00"`, "é😀"},
		{`12345678901234567890123`, json.Number("12345678901234567890123")},
		{`[]`, []any{}},
	}
	for _, tt := range tests {
		got, err := Decode([]byte(tt.in), 0)
		if err != nil {
			t.Errorf("Decode(%s): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decode(%s) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, in, reason string
		depth            int
	}{
		{"empty", "  ", "empty", 0},
		{"two values", `{} {}`, "more than one JSON value", 0},
		{"trailing garbage", `{"a":1}x`, "more than one JSON value", 0},
		{"duplicate key", `{"a":1,"a":2}`, "duplicate object key", 0},
		{"nested duplicate", `{"x":{"a":1,"a":2}}`, "duplicate object key", 0},
		{"invalid utf8", "{\"a\":\"\xff\"}", "not valid UTF-8", 0},
		{"deep", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), "nesting deeper than 64", 0},
		{"depth bound", `{"a":{"b":{}}}`, "nesting deeper than 2", 2},
		{"truncated", `{"a":`, "truncated", 0},
		{"syntax", `{"a" 1}`, "invalid JSON", 0},
		{"single quotes", `{'a':1}`, "invalid JSON", 0},
		{"lone surrogate", `"\ud800"`, "invalid JSON", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in), tt.depth)
			if err == nil {
				t.Fatalf("Decode(%q) accepted", tt.in)
			}
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error is %T, want *Error", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
		})
	}
}

func TestDuplicatePointer(t *testing.T) {
	_, err := Decode([]byte(`{"x":{"a":1,"a":2}}`), 0)
	if e := err.(*Error); e.Pointer != "/x/a" {
		t.Errorf("pointer = %q, want /x/a", e.Pointer)
	}
}

// FuzzDecode checks Decode against encoding/json: whatever Decode accepts,
// encoding/json accepts and decodes to the same tree; nothing panics.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `"x"`, `{"a":1,"a":1}`, "[\"\xff\"]", `[[[[[]]]]]`, `1e999`, `[[[[[[[[[]]]]]]]]]`, `{"a":1,"\u0061":2}`, `{"a":{"a":1}}`, `[1,]`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode(data, 8)
		if refuse := refusedByReference(data, 8); refuse != (err != nil) {
			t.Fatalf("Decode(%q): error %v, but the reference refuses: %v", data, err, refuse)
		}
		if err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("Decode accepted %q but encoding/json refuses: %v", data, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("trees differ for %q (-encoding/json +strictjson):\n%s", data, diff)
		}
	})
}

// TestPooledDecoderForgets: the tokenizer is reused between bodies, so
// nothing of one body may reach the next — not its names (a name seen
// before is no duplicate in the next body), not its depth after a failure
// half-way, not its bytes (the input is changed after Decode returns).
// Run in parallel, under -race, the pool must hand each tokenizer to one
// caller at a time.
func TestPooledDecoderForgets(t *testing.T) {
	bodies := []struct {
		in string
		ok bool
	}{
		{`{"a":1,"b":{"a":2}}`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":[[[[[`, false},
		{`{"a":1}`, true},
		{`{"a":{"a":{"a":{}}}}`, true},
		{`"x" "y"`, false},
		{`{"b":"\u00e9"}`, true},
	}
	for g := range 4 {
		t.Run(strings.Repeat("g", g+1), func(t *testing.T) {
			t.Parallel()
			for range 200 {
				for _, b := range bodies {
					in := []byte(b.in)
					v, err := Decode(in, 4)
					if (err == nil) != b.ok {
						t.Fatalf("Decode(%s): %v, want ok %v", b.in, err, b.ok)
					}
					if err != nil {
						continue
					}
					want, _ := json.Marshal(v)
					for i := range in {
						in[i] = ' ' // the caller reuses its buffer
					}
					if got, _ := json.Marshal(v); !bytes.Equal(got, want) {
						t.Fatalf("Decode(%s) changed with its input: %s, then %s", b.in, want, got)
					}
				}
			}
		})
	}
}
