package strictjson

import (
	"bytes"
	"testing"
)

// canonicalCases are documents for both the table test and the fuzz
// target's seed corpus: what the fast path writes itself, and what it
// leaves to jsontext.
var canonicalCases = []struct {
	in, want string
	fast     bool // the fast path answers it (else jsontext does)
}{
	{`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`, `{"data":{"n":1,"tags":["a","b"]},"message":"hello, toold"}`, true},
	{" {\n\t\"b\" : [ 1 , 2 ] ,\r\n \"a\" : { } } ", `{"a":{},"b":[1,2]}`, true},
	{`{}`, `{}`, true},
	{`[]`, `[]`, true},
	{`"x"`, `"x"`, true},
	{`true`, `true`, true},
	{`null`, `null`, true},
	{`[false,true,null]`, `[false,true,null]`, true},
	{`-0`, `0`, true},
	{`-0.0`, `0`, true},
	{`1.0`, `1`, true},
	{`1e2`, `100`, true},
	{`1E+2`, `100`, true},
	{`0.000001`, `0.000001`, true},
	{`0.0000001`, `1e-7`, true},
	{`1e21`, `1e+21`, true},
	{`123456789012345678901`, `123456789012345680000`, true},
	{`9007199254740993`, `9007199254740992`, true},
	{`-1.5e-300`, `-1.5e-300`, true},
	{`4.35`, `4.35`, true},
	{`12345678901234`, `12345678901234`, true},
	{`"a\"b\\c\/d\b\f\n\r\t"`, `"a\"b\\c/d\b\f\n\r\t"`, true},
	{`"\u0041\u00e9\u001F\u007f\u2028"`, "\"A\u00e9\\u001f\u007f\u2028\"", true},
	{`"é😀"`, `"é😀"`, true},
	{`{"b":1,"a":{"d":[{"z":1,"y":2}],"c":2}}`, `{"a":{"c":2,"d":[{"y":2,"z":1}]},"b":1}`, true},
	{`{"é":1,"e":2,"f":3}`, `{"e":2,"f":3,"é":1}`, true},
	{`{"ab":1,"a":2}`, `{"a":2,"ab":1}`, true},
	// Left to jsontext: names with escapes, names that sort otherwise in
	// UTF-16, surrogate escapes, duplicates, invalid input.
	{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`, false},
	{`{"\ue000":1,"😀":2}`, "{\"😀\":2,\"\ue000\":1}", false},
	{`"\ud83d\ude00"`, `"😀"`, false},
	{`{"a":1,"a":2}`, `{"a":1,"a":2}`, false},
	{`{"a":1,}`, `{"a":1,}`, false},
	{`[1 2]`, `[1 2]`, false},
	{`{"a":1} x`, `{"a":1} x`, false},
	{`1e400`, `1.7976931348623157e+308`, false}, // jsontext clamps to the largest float64
	{`01`, `01`, false},
	{`"\x"`, `"\x"`, false},
	{"\"\xff\"", "\"\xff\"", false},
	{``, ``, false},
	{`tru`, `tru`, false},
}

func TestCanonical(t *testing.T) {
	for _, tc := range canonicalCases {
		got := Canonical([]byte(tc.in))
		if string(got) != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if slow := canonicalSlow([]byte(tc.in)); !bytes.Equal(got, slow) {
			t.Errorf("Canonical(%q) = %q, jsontext %q", tc.in, got, slow)
		}
		if _, ok := canonicalize([]byte(tc.in)); ok != tc.fast {
			t.Errorf("canonicalize(%q) answered: %v, want %v", tc.in, ok, tc.fast)
		}
		if isCanonical([]byte(tc.in)) && tc.in != tc.want {
			t.Errorf("isCanonical(%q), whose canonical form is %q", tc.in, tc.want)
		}
	}
}

// TestIsCanonical: what the check takes as canonical already (returned
// as it is) and what it leaves to be written, each against jsontext.
func TestIsCanonical(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{`{"data":{"n":1,"tags":["a","b"]},"message":"hello, toold"}`, true},
		{`{}`, true},
		{`[]`, true},
		{`[[],{},[{}]]`, true},
		{`{"a":{"z":1},"b":{"a":2}}`, true}, // each object's names in order
		{`"x"`, true},
		{`-12`, true},
		{`0`, true},
		{`[true,false,null]`, true},
		{`"a\"b\\c\b\f\n\r\t\u0000\u001f"`, true},
		{`"é😀 "`, true},
		{`{"é":1}`, false},                      // a name beyond ASCII: left to canonicalize
		{`{"message":"hello","data":1}`, false}, // unsorted
		{`{"a":1,"a":1}`, false},                // a duplicate
		{`{"a":{"b":1},"a":2}`, false},
		{`{"a": 1}`, false}, // space
		{` {}`, false},
		{`{} `, false},
		{`-0`, false},
		{`01`, false},
		{`1.5`, false},
		{`1e2`, false},
		{`1234567890123456`, false}, // 16 digits
		{`"\/"`, false},
		{`"\u0041"`, false},
		{`"\u000a"`, false},
		{`"\u001F"`, false},
		{`"\u007f"`, false},
		{"\"\xff\"", false},
		{"\"\x01\"", false},
		{`{"a":1,}`, false},
		{`[1,]`, false},
		{`[1}`, false},
		{`{"a":1]`, false},
		{`{"a"}`, false},
		{`tru`, false},
		{``, false},
		{`{"a":1}{}`, false},
	} {
		if got := isCanonical([]byte(tt.in)); got != tt.want {
			t.Errorf("isCanonical(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if tt.want {
			if slow := canonicalSlow([]byte(tt.in)); string(slow) != tt.in {
				t.Errorf("%q is taken as canonical, jsontext writes %q", tt.in, slow)
			}
		}
	}
	deep := bytes.Repeat([]byte("["), canonMaxDepth+1)
	deep = append(deep, bytes.Repeat([]byte("]"), canonMaxDepth+1)...)
	if isCanonical(deep) {
		t.Error("a document deeper than canonMaxDepth is taken as canonical")
	}
}

// FuzzCanonical holds the fast path to jsontext's canonical form: the same
// bytes for every input it answers; and a document isCanonical takes as it
// is is jsontext's canonical form already.
func FuzzCanonical(f *testing.F) {
	for _, tc := range canonicalCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if isCanonical(data) {
			if slow := canonicalSlow(data); !bytes.Equal(data, slow) {
				t.Fatalf("isCanonical(%q), jsontext writes %q", data, slow)
			}
		}
		fast, ok := canonicalize(data)
		if !ok {
			return
		}
		if slow := canonicalSlow(data); !bytes.Equal(fast, slow) {
			t.Fatalf("canonicalize(%q) = %q, jsontext %q", data, fast, slow)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	args := []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)
	b.Run("already-canonical", func(b *testing.B) {
		sorted := []byte(`{"data":{"n":1,"tags":["a","b"]},"message":"hello, toold"}`)
		b.ReportAllocs()
		for b.Loop() {
			Canonical(sorted)
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Canonical(args)
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			canonicalSlow(args)
		}
	})
}
