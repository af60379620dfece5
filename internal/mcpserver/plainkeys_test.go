package mcpserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// plainKeysRef is plainKeys written with encoding/json's tokenizer: the
// reference the scanner is held to.
func plainKeysRef(raw []byte, allowed []string) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	var seen []string
	for dec.More() {
		off := dec.InputOffset()
		t, err := dec.Token()
		k, _ := t.(string)
		if err != nil || !slices.Contains(allowed, k) || slices.Contains(seen, k) {
			return false
		}
		// Spelt without escapes: the raw name is the name in quotes.
		rest := bytes.TrimLeft(raw[off:], " \t\r\n,")
		if !bytes.HasPrefix(rest, []byte(`"`+k+`"`)) {
			return false
		}
		seen = append(seen, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return true
}

func TestPlainKeys(t *testing.T) {
	cases := []struct {
		raw  string
		want bool
	}{
		{`{}`, true},
		{` { "name" : "x" , "arguments" : {"a":[1,{"b":"}"}],"c":"\""} } `, true},
		{`{"name":"x","_meta":{"progressToken":1},"arguments":null}`, true},
		{`{"name":1.5e3,"arguments":true}`, true},
		{`{"Name":"x"}`, false},
		{`{"name":"x","name":"y"}`, false},
		{`{"n\u0061me":"x"}`, false},
		{`{"name":"x","extra":1}`, false},
		{`[]`, false},
		{`"name"`, false},
	}
	for _, c := range cases {
		if got := plainKeys([]byte(c.raw), paramKeys); got != c.want {
			t.Errorf("plainKeys(%s) = %v, want %v", c.raw, got, c.want)
		}
		if got := plainKeysRef([]byte(c.raw), paramKeys); got != c.want {
			t.Errorf("the reference on %s = %v, want %v", c.raw, got, c.want)
		}
	}
}

// FuzzPlainKeys: on any valid JSON, the scanner agrees with the reference.
func FuzzPlainKeys(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"x","arguments":{"a":[1,"]"]}}`, `{"_meta":{},"name":"\\"}`, `{"name":[[]],"arguments":-0.5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return
		}
		if got, want := plainKeys([]byte(raw), paramKeys), plainKeysRef([]byte(raw), paramKeys); got != want {
			t.Fatalf("plainKeys(%s) = %v, the reference says %v", raw, got, want)
		}
	})
}
