package sanitize

import (
	"bytes"
	"strings"
	"testing"
)

// TestLineRedactor: findings are redacted line by line with every line
// break kept; a key block gets a marker on each line, also when it spans
// two calls.
func TestLineRedactor(t *testing.T) {
	s := newTB(t, Config{})
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\nBgkqhkiG9w0B\n-----END PRIVATE KEY-----\n"
	cases := []struct {
		name   string
		blocks []string
		want   string
	}{
		{"clean", []string{"a\nb\n"}, "a\nb\n"},
		{"token", []string{"x\nt=" + encToken + " y\nz"}, "x\nt=[REDACTED:github_token] y\nz"},
		{"encoded", []string{"u=" + pctAll(encToken) + "\n"}, "u=[REDACTED:github_token]\n"},
		{"key in one block", []string{"a\n" + key + "b\n"}, "a\n" + strings.Repeat("[REDACTED:private_key]\n", 4) + "b\n"},
		{"key across blocks", []string{"a\n" + key[:41], key[41:] + "b\n"}, "a\n" + strings.Repeat("[REDACTED:private_key]\n", 4) + "b\n"},
		{"open key, empty line next block", []string{"0-----BEGIN PRIVATE KEY-----\n", "\n"}, "0[REDACTED:private_key]\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.NewLineRedactor("grep")
			var got strings.Builder
			for _, b := range tc.blocks {
				got.Write(r.Lines([]byte(b)))
			}
			if got.String() != tc.want {
				t.Errorf("got  %q\nwant %q", got.String(), tc.want)
			}
		})
	}
}

// FuzzLineRedactor: the line breaks are kept; split into blocks at any
// line breaks, a text redacts as it does whole; no line left holds
// anything RedactString would still redact.
func FuzzLineRedactor(f *testing.F) {
	addCorpusSeeds(f, func(s string) []byte { return []byte(s) })
	s := newTB(f, Config{})
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := append([]byte(nil), s.NewLineRedactor("grep").Lines(data)...)
		if bytes.Count(whole, []byte("\n")) != bytes.Count(data, []byte("\n")) {
			t.Fatalf("line breaks changed: %q -> %q", data, whole)
		}
		r := s.NewLineRedactor("grep")
		var pieces []byte
		rest := data
		for k := 0; len(rest) > 0; k++ {
			n := bytes.IndexByte(rest, '\n') + 1
			if n == 0 || k%3 == 2 {
				n = len(rest)
			}
			pieces = append(pieces, r.Lines(rest[:n])...)
			rest = rest[n:]
		}
		if !bytes.Equal(pieces, whole) {
			t.Fatalf("in blocks %q, whole %q (input %q)", pieces, whole, data)
		}
		for _, line := range strings.Split(string(whole), "\n") {
			if got := s.policyByName("grep").output.redactString(line, nil); got != line {
				t.Fatalf("line %q still redacts to %q (input %q)", line, got, data)
			}
		}
	})
}
