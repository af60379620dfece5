package strictjson

import (
	"encoding/json"
	"testing"
)

func TestNumberEnd(t *testing.T) {
	tests := []struct {
		in   string
		end  int
		ok   bool
		note string
	}{
		{"0", 1, true, ""},
		{"-0", 2, true, ""},
		{"123", 3, true, ""},
		{"-1.5e+10", 8, true, ""},
		{"1E5", 3, true, ""},
		{"0.25,", 4, true, "stops at the comma"},
		{"01", 1, true, "a leading zero ends the number; the caller judges what follows"},
		{"1.x", 0, false, "a fraction needs digits"},
		{"1e", 0, false, "an exponent needs digits"},
		{"1e+", 0, false, ""},
		{"-", 0, false, ""},
		{".5", 0, false, ""},
		{"+1", 0, false, ""},
		{"", 0, false, ""},
		{"x", 0, false, ""},
	}
	for _, tt := range tests {
		end, ok := NumberEnd([]byte(tt.in), 0)
		if end != tt.end || ok != tt.ok {
			t.Errorf("NumberEnd(%q) = %d, %v; want %d, %v %s", tt.in, end, ok, tt.end, tt.ok, tt.note)
		}
	}
}

// FuzzNumberEnd: a number NumberEnd accepts whole is a JSON number to
// encoding/json, and one it refuses or ends early is not.
func FuzzNumberEnd(f *testing.F) {
	for _, s := range []string{"0", "-1.5e+10", "01", "1.", "1e", "-", "9007199254740993", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		end, ok := NumberEnd([]byte(s), 0)
		whole := ok && end == len(s)
		var n json.Number
		valid := len(s) > 0 && s[0] != ' ' && s[0] != '"' && json.Unmarshal([]byte(s), &n) == nil && json.Valid([]byte(s)) && string(n) == s
		if whole != valid {
			t.Fatalf("NumberEnd(%q) = %d, %v; encoding/json says a number: %v", s, end, ok, valid)
		}
	})
}

func TestSkipSpace(t *testing.T) {
	for _, tt := range []struct {
		in   string
		from int
		want int
	}{{"", 0, 0}, {"  \t\r\nx", 0, 5}, {"x ", 1, 2}, {"\v", 0, 0}, {"a b", 0, 0}} {
		if got := SkipSpace([]byte(tt.in), tt.from); got != tt.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", tt.in, tt.from, got, tt.want)
		}
	}
}
