package sanitize

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestAdversarialLinear: repeating any anchor or near-match costs time in
// proportion to its length: no detector rescans what it passed.
func TestAdversarialLinear(t *testing.T) {
	s := newTB(t, withIP)
	for _, unit := range []string{"a@", "password:\"", "password='", "://a", "eyJaaaaaaaaaaaaa.", "-----BEGIN PRIVATE KEY-----", "1 ", "1-", "+1 ", "::", "\x1b]", "A", "gh", "sk-", "k_live_", "Bearer ", "AKIA", "=", ":", "x", "DE12 ", "{\"password\":", "-----BEGIN PRIVATE KEY-----\n-", "a.", "a1@b.", "1.1.", "(212) "} {
		var prev time.Duration
		for _, n := range []int{1 << 16, 1 << 18} {
			text := strings.Repeat(unit, n/len(unit))
			start := time.Now()
			_ = s.RedactString("t", text)
			d := time.Since(start)
			if prev > 0 && d > 10*prev && d > 50*time.Millisecond {
				t.Errorf("%q: %v for %d bytes after %v for a quarter", unit, d, n, prev)
			}
			prev = d
			if d > time.Second {
				t.Errorf("%q: %v for %d bytes", unit, d, n)
			}
		}
	}
}

// TestAdversarialOutput: the cap, deep or wide documents and streams of
// anchors stay fast.
func TestAdversarialOutput(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: 64 << 10}}})
	var many bytes.Buffer
	many.WriteString("[")
	for i := range 200_000 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"jane@example.com x"`)
	}
	many.WriteString("]")
	docs := map[string][]byte{
		"200k strings over the cap": many.Bytes(),
		"one 4 MiB string":          jsonString(strings.Repeat("password=abc123 ", 1<<18)),
		"wide object":               []byte("{" + strings.Repeat(`"k":1,`, 300_000) + `"k":1}`),
	}
	for name, data := range docs {
		start := time.Now()
		out, _, _ := s.Output(context.Background(), directSpec, data)
		if d := time.Since(start); d > 3*time.Second || len(out) > 64<<10 || !json.Valid(out) {
			t.Errorf("%s: %v, %d bytes, valid %v", name, d, len(out), json.Valid(out))
		}
	}
	start := time.Now()
	var sink bytes.Buffer
	r := s.NewStreamRedactor(&sink, "cmd")
	for range 1000 {
		_, _ = r.Write([]byte(strings.Repeat("password=x1 ", 100)))
	}
	_ = r.Flush()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stream: %v", d)
	}
}
