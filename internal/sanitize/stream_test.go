package sanitize

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// streamAll writes text in the given pieces and flushes.
func streamAll(tb testing.TB, s *Sanitizer, tool string, pieces []string) string {
	tb.Helper()
	var out bytes.Buffer
	r := s.NewStreamRedactor(&out, tool)
	for _, p := range pieces {
		if _, err := r.Write([]byte(p)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.String()
}

// chunks cuts s at random points.
func chunks(r *rand.Rand, s string, maxLen int) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 1+r.IntN(maxLen))
		out, s = append(out, s[:n]), s[n:]
	}
	return out
}

// TestStreamSplitSecrets: every canary file, cut at every byte into two
// writes and at random into many, redacts exactly as one write does, and
// leaks none of its values.
func TestStreamSplitSecrets(t *testing.T) {
	s := newTB(t, withIP)
	rng := rand.New(rand.NewPCG(1, 2))
	manifest := loadManifest(t)
	for _, name := range sortedKeys(manifest) {
		text := readFile(t, filepath.Join("testdata", "canary", name))
		whole := streamAll(t, s, "run_command", []string{text})
		for _, v := range manifest[name].Values {
			if strings.Contains(whole, v) {
				t.Fatalf("%s: %q survives the stream", name, v)
			}
		}
		for cut := 1; cut < len(text); cut++ {
			if got := streamAll(t, s, "run_command", []string{text[:cut], text[cut:]}); got != whole {
				t.Fatalf("%s cut at %d:\n got %.300q\nwant %.300q", name, cut, got, whole)
			}
		}
		for range 20 {
			if got := streamAll(t, s, "run_command", chunks(rng, text, 16)); got != whole {
				t.Fatalf("%s in random chunks:\n got %.300q\nwant %.300q", name, got, whole)
			}
		}
	}
}

func TestStreamEscapesAndUTF8AcrossWrites(t *testing.T) {
	s := newTB(t, Config{Tools: map[string]Policy{"cmd": {Output: OutputPolicy{StripANSI: ptr(true)}}}})
	got := streamAll(t, s, "cmd", []string{"a\x1b[3", "1mred\x1b", "[0m \xe2\x82", "\xac \xff", "\x1b]0;ti", "tle\x07end\n"})
	if want := "ared \u20ac \uFFFDend\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

// TestStreamLongLineBounded: a line far longer than the window is cut
// outside findings; memory stays bounded and nothing leaks.
func TestStreamLongLineBounded(t *testing.T) {
	s := newTB(t, Config{StreamWindowBytes: 1024})
	var line strings.Builder
	var tokens []string
	for i := 0; line.Len() < 200_000; i++ {
		tok := fmt.Sprintf("ghp_%036d", i)
		tokens = append(tokens, tok)
		line.WriteString(strings.Repeat("x ", 300) + tok + " ")
	}
	var out bytes.Buffer
	r := s.NewStreamRedactor(&out, "cmd")
	maxHeld := 0
	for _, c := range chunks(rand.New(rand.NewPCG(3, 4)), line.String(), 700) {
		_, _ = r.Write([]byte(c))
		maxHeld = max(maxHeld, cap(r.pending)+cap(r.raw)+cap(r.buf))
	}
	_ = r.Flush()
	if maxHeld > 8*1024 {
		t.Errorf("held %d bytes with a 1 KiB window", maxHeld)
	}
	for _, tok := range tokens {
		if strings.Contains(out.String(), tok) {
			t.Fatalf("%s leaked", tok)
		}
	}
	if n := strings.Count(out.String(), "[REDACTED:github_token]"); n != len(tokens) {
		t.Errorf("%d redactions for %d tokens", n, len(tokens))
	}
}

func TestStreamPrivateKeyAcrossLines(t *testing.T) {
	s := newTB(t, Config{})
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACBz\n-----END OPENSSH PRIVATE KEY-----\n"
	pieces := []string{"$ cat id\n"}
	for _, line := range strings.SplitAfter(key, "\n") {
		pieces = append(pieces, line)
	}
	got := streamAll(t, s, "cmd", append(pieces, "$ done\n"))
	if want := "$ cat id\n[REDACTED:private_key]\n$ done\n"; got != want || got != s.RedactString("cmd", strings.Join(pieces, "")+"$ done\n") {
		t.Errorf("got %q want %q", got, want)
	}
}

// TestStreamPipeline: Stream keeps one redactor per stream name, is safe
// for concurrent writers, and flushes what it holds back.
func TestStreamPipeline(t *testing.T) {
	s := newTB(t, Config{})
	var mu sync.Mutex
	got := map[string]string{}
	emit := func(c tools.Chunk) {
		mu.Lock()
		got[c.Stream] += c.Data
		mu.Unlock()
	}
	wrapped, flush := s.Stream(commandSpec, emit)
	secret := "AKIAQYLPMN5HHHFPZAM2"
	var wg sync.WaitGroup
	for _, name := range []string{"stdout", "stderr"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				wrapped(tools.Chunk{Stream: name, Data: fmt.Sprintf("%d %s", i, secret[:7])})
				wrapped(tools.Chunk{Stream: name, Data: secret[7:] + "\n"})
			}
			wrapped(tools.Chunk{Stream: name, Data: "tail " + secret})
		}()
	}
	wg.Wait()
	flush()
	for _, name := range []string{"stdout", "stderr"} {
		if strings.Contains(got[name], "AKIA") || strings.Count(got[name], "[REDACTED:aws_access_key_id]") != 51 || !strings.HasSuffix(got[name], "tail [REDACTED:aws_access_key_id]") {
			t.Errorf("%s: %.200q", name, got[name])
		}
	}
}
