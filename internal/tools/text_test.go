package tools

import (
	"testing"
	"unicode/utf8"
)

// TestCutUTF8: a cut never splits a character, and keeps as many bytes
// as fit.
func TestCutUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "abc"},
		{"abc", 0, ""},
		{"aé", 2, "a"},            // é is two bytes: it does not fit in one
		{"aé", 3, "aé"},           // and does in two
		{"日本語", 4, "日"},           // three-byte characters
		{"x😀y", 4, "x"},           // a four-byte one, cut inside
		{"x😀y", 5, "x😀"},          // and kept whole
		{"\xff\xfeab", 1, "\xff"}, // invalid bytes are not characters to keep whole
	} {
		if got := CutUTF8(tc.s, tc.n); got != tc.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := string(CutUTF8([]byte(tc.s), tc.n)); got != tc.want {
			t.Errorf("CutUTF8([]byte(%q), %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if utf8.ValidString(tc.s) && !utf8.ValidString(CutUTF8(tc.s, tc.n)) {
			t.Errorf("CutUTF8(%q, %d) is not valid UTF-8", tc.s, tc.n)
		}
	}
}

// TestTailUTF8: the end of a text, never starting inside a character.
func TestTailUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "def"},
		{"abc", 0, ""},
		{"éa", 2, "a"},  // é is two bytes: it does not fit in one
		{"éa", 3, "éa"}, // and does in two
		{"日本語", 4, "語"},
		{"x😀y", 4, "y"},
		{"x😀y", 5, "😀y"},
	} {
		if got := TailUTF8(tc.s, tc.n); got != tc.want {
			t.Errorf("TailUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := string(TailUTF8([]byte(tc.s), tc.n)); got != tc.want {
			t.Errorf("TailUTF8([]byte(%q), %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
