package launch

import (
	"os"
	"strings"
	"unicode/utf8"
)

// stream collects one of a command's outputs: at most max bytes are kept
// (toold's memory stays bounded whatever the command writes), and each
// chunk read is streamed to the caller as valid UTF-8.
type stream struct {
	name      string
	max       int
	buf       strings.Builder
	truncated bool
	carry     []byte // an incomplete UTF-8 sequence held for the next chunk
	emit      func(stream, data string)
}

// firstGrow is the first allocation of a stream: small commands (most of
// them) never allocate their whole cap.
const firstGrow = 64 << 10

// pump reads r until EOF, a read error (toold closed r) or the cap; at the
// cap it calls full at once, so the producer is stopped without waiting.
func (s *stream) pump(r *os.File, full func(name string)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && !s.feed(buf[:n]) {
			full(s.name)
			return
		}
		if err != nil {
			s.flush()
			return
		}
	}
}

// feed keeps p within the cap and streams it; false means the cap is hit.
func (s *stream) feed(p []byte) bool {
	room := s.max - s.buf.Len()
	ok := len(p) <= room
	if !ok {
		p, s.truncated = p[:room], true
	}
	if need := s.buf.Len() + len(p); need > s.buf.Cap() {
		// Grow in at most two steps (firstGrow, then the cap), never past
		// the cap by more than the builder's rounding: no doubling ladder
		// of garbage copies.
		if need <= firstGrow {
			s.buf.Grow(firstGrow - s.buf.Len())
		} else {
			s.buf.Grow(s.max - s.buf.Len())
		}
	}
	s.buf.Write(p)
	if s.emit != nil {
		s.send(p)
	}
	return ok
}

// send emits p after the carried bytes, holding back a trailing incomplete
// rune so every chunk is valid UTF-8 on its own.
func (s *stream) send(p []byte) {
	data := append(s.carry, p...)
	whole, rest := splitUTF8(data)
	s.carry = append([]byte(nil), rest...)
	if len(whole) > 0 {
		s.emit(s.name, strings.ToValidUTF8(string(whole), "\uFFFD"))
	}
}

func (s *stream) flush() {
	if s.emit != nil && len(s.carry) > 0 {
		s.emit(s.name, strings.ToValidUTF8(string(s.carry), "\uFFFD"))
	}
	s.carry = nil
}

// text returns what was kept as valid UTF-8, and whether bytes had to be
// replaced. A rune cut by the cap is dropped rather than reported invalid.
func (s *stream) text() (string, bool) {
	out := s.buf.String()
	if s.truncated {
		tail := len(out) - min(len(out), utf8.UTFMax)
		whole, _ := splitUTF8([]byte(out[tail:]))
		out = out[:tail+len(whole)] // a slice, not a copy of the whole output
	}
	if utf8.ValidString(out) {
		return out, false
	}
	return strings.ToValidUTF8(out, "\uFFFD"), true
}

// splitUTF8 splits b before a trailing rune that is not complete yet.
func splitUTF8(b []byte) (whole, rest []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}
