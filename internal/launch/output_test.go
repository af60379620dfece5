package launch

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestStreamUTF8(t *testing.T) {
	var chunks []string
	s := &stream{name: "stdout", max: 1 << 20, emit: func(_, d string) { chunks = append(chunks, d) }}
	in := []byte("héllo wörld \xff end €")
	for i := range in { // one byte at a time: every rune is cut
		s.feed(in[i : i+1])
	}
	s.flush()
	for _, c := range chunks {
		if !utf8.ValidString(c) {
			t.Errorf("chunk %q is not UTF-8", c)
		}
	}
	want := "héllo wörld \uFFFD end €"
	if diff := cmp.Diff(want, strings.Join(chunks, "")); diff != "" {
		t.Errorf("streamed (-want +got):\n%s", diff)
	}
	text, invalid := s.text()
	if text != want || !invalid {
		t.Errorf("text %q invalid %v", text, invalid)
	}
}

func TestStreamCap(t *testing.T) {
	s := &stream{name: "stdout", max: 5}
	if !s.feed([]byte("ab")) || s.feed([]byte("c€")) {
		t.Fatal("the cap was not reported")
	}
	text, invalid := s.text()
	// "abc" plus 2 of the euro sign's 3 bytes were kept; the cut rune is dropped.
	if text != "abc" || invalid || !s.truncated {
		t.Errorf("text %q invalid %v truncated %v", text, invalid, s.truncated)
	}
}
