package sanitize

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The adversarial suite holds the sanitizer to linear time: every input
// here is run at two sizes, a quarter and the whole, and the whole may cost
// at most 10 times the quarter (linear is 4, quadratic 16). Each size is
// timed twice and the lesser kept, so a pause of the shared machine
// (the race detector, other packages' tests) is not taken for a rescan;
// the absolute bound is only a backstop against a hang.

// growth times run(n/4) and run(n) and reports when the larger costs more
// than linear time allows.
func growth(t *testing.T, name string, n int, run func(n int)) {
	t.Helper()
	least := func(n int) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 2 {
			start := time.Now()
			run(n)
			best = min(best, time.Since(start))
		}
		return best
	}
	// Wall-clock time on a shared machine jumps with the other tenants: a
	// pair of sizes out of proportion is measured again, twice at most.
	// Quadratic work is out of proportion (16 times for 4 times the size)
	// every time; a neighbour's burst is not.
	var quarter, whole time.Duration
	for range 3 {
		quarter, whole = least(n/4), least(n)
		if whole <= 10*quarter || whole <= 50*time.Millisecond {
			break
		}
	}
	if whole > 10*quarter && whole > 50*time.Millisecond {
		t.Errorf("%s: %v for size %d after %v for a quarter", name, whole, n, quarter)
	}
	if whole > 10*time.Second {
		t.Errorf("%s: %v for size %d", name, whole, n)
	}
}

// TestAdversarialLinear: repeating any anchor or near-match costs time in
// proportion to its length: no detector rescans what it passed.
func TestAdversarialLinear(t *testing.T) {
	s := newTB(t, withIP)
	for _, unit := range []string{"a@", "password:\"", "password='", "://a", "eyJaaaaaaaaaaaaa.", "-----BEGIN PRIVATE KEY-----", "1 ", "1-", "+1 ", "::", "\x1b]", "A", "gh", "sk-", "k_live_", "Bearer ", "AKIA", "=", ":", "x", "DE12 ", "{\"password\":", "-----BEGIN PRIVATE KEY-----\n-", "a.", "a1@b.", "1.1.", "(212) "} {
		growth(t, strings.TrimSpace(unit), 1<<18, func(n int) {
			_ = s.RedactString("t", strings.Repeat(unit, n/len(unit)))
		})
	}
}

// TestAdversarialOutput: the cap, deep or wide documents and streams of
// anchors stay linear, and what comes out stays within the cap and valid.
func TestAdversarialOutput(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: 64 << 10}}})
	docs := map[string]func(n int) []byte{
		"strings over the cap": func(n int) []byte {
			var b bytes.Buffer
			b.WriteString("[")
			for i := range n {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(`"jane@example.com x"`)
			}
			b.WriteString("]")
			return b.Bytes()
		},
		"one long string": func(n int) []byte { return jsonString(strings.Repeat("password=abc123 ", n)) },
		"wide object":     func(n int) []byte { return []byte("{" + strings.Repeat(`"k":1,`, n) + `"k":1}`) },
	}
	sizes := map[string]int{"strings over the cap": 100_000, "one long string": 1 << 17, "wide object": 150_000}
	for name, doc := range docs {
		inputs := map[int][]byte{}
		growth(t, name, sizes[name], func(n int) {
			if inputs[n] == nil {
				inputs[n] = doc(n)
			}
			out, _, _ := s.Output(context.Background(), directSpec, inputs[n])
			if len(out) > 64<<10 || !json.Valid(out) {
				t.Fatalf("%s of size %d: %d bytes out, valid %v", name, n, len(out), json.Valid(out))
			}
		})
	}
	growth(t, "stream", 1000, func(n int) {
		var sink bytes.Buffer
		r := s.NewStreamRedactor(&sink, "cmd")
		for range n {
			_, _ = r.Write([]byte(strings.Repeat("password=x1 ", 100)))
		}
		_ = r.Flush()
	})
}

// TestAdversarialReview: the approver's view of an argument stays linear
// in it: format characters, key frames, assignments, lines.
func TestAdversarialReview(t *testing.T) {
	s := newTB(t, Config{})
	for _, unit := range []string{"\u202e", "a\u200b", "-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----\nA\n-----END PRIVATE KEY-----\n",
		"PASSWORD='x;y'\n", "line\n", "ghp_0123456789abcdefghijABCDEFGHIJ012345 "} {
		growth(t, "review "+strings.TrimSpace(unit), 1<<17, func(n int) {
			_, _ = s.Review("t", map[string]any{"content": strings.Repeat(unit, n/len(unit))})
		})
	}
}

// TestAdversarialAcrossLines: the byte lists, the dumps, base32 and the
// joined lines stay linear however the text repeats them.
func TestAdversarialAcrossLines(t *testing.T) {
	s := newTB(t, Config{})
	for _, unit := range []string{"67 ", "6768 ", "0x67, ", "103, ", "67:", "0x67,\n", "103,\n  ", "00000000: 6768 705f  gh\n",
		"00000010  67 68 70 5f  |ghp_|\n", "ghp_abcdefghij\nklmnopqrst\n", strings.Repeat("a", 40) + "\n", "4142434445464748494a4b4c4d4e4f5051\n",
		"MFRGGZDFMZTWQ2LK", "MFRGGZDF\n", "1 2 3 ", "ab cd ef ", "0 67 68 5f ", "100 67 68 70 ",
		// Issue 38: numbered lines, quoted pieces and their glue.
		"     1\tghp_abcdefghij\n", "  12\t\n", "a\"", "a\" ", "a\"\"", "a'+'", "a\",\"k\":\"", "ab\" +\n  \"", "ab\",\n     1\t\"",
		"a\" \"" + strings.Repeat("k", 60) + "\":", "ghp_abcdefghij\" \"klmnopqrst", "x\\\n"} {
		growth(t, "across "+strings.TrimSpace(unit), 1<<18, func(n int) {
			_ = s.RedactString("t", strings.Repeat(unit, n/len(unit)))
		})
	}
	growth(t, "split across values", 1<<16, func(n int) {
		var b strings.Builder
		b.WriteString("[")
		for i := range n / 40 {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"ghp_abcdefghijklmn","opqrstuvwxyz0123456"`)
		}
		b.WriteString("]")
		_, _, _ = s.Output(context.Background(), commandSpec, []byte(b.String()))
	})
}
