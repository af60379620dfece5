package sanitize

import "unicode/utf8"

// Text repair, before detection: invalid UTF-8 bytes become U+FFFD one by
// one (as encoding/json replaces them, so a stream cleans the same however
// it is chunked) and, with strip, terminal escape sequences (ECMA-48 CSI,
// OSC/DCS/SOS/PM/APC strings, other ESC sequences, their C1 forms) and
// control characters other than tab, newline and carriage return are
// removed.

// cleanStats counts repairs for the report's notes.
type cleanStats struct {
	bad      int // invalid UTF-8 bytes replaced
	stripped int // escape sequences and control characters removed
}

// needsClean reports whether cleanText would change s.
func needsClean(s string, strip bool) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		for i+8 <= len(s) && hasControlOrHigh(load64(s, i)) == 0 {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x80 {
			ascii = false
			if !strip {
				break
			}
		} else if strip && (c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f) {
			return true
		}
	}
	return !ascii && (!utf8.ValidString(s) || strip && hasC1(s))
}

func hasC1(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == 0xc2 && s[i+1] >= 0x80 && s[i+1] <= 0x9f {
			return true
		}
	}
	return false
}

// cleanText appends the repaired s to dst. Unless final, it stops before
// an incomplete UTF-8 sequence or escape sequence at the end and returns
// how much of s it consumed, so a stream can hold the rest back.
func cleanText(dst []byte, s string, strip, final bool, st *cleanStats) ([]byte, int) {
	i := 0
	for i < len(s) {
		c := s[i]
		if 0x20 <= c && c < 0x7f {
			j := i + 1
			for j < len(s) && 0x20 <= s[j] && s[j] < 0x7f {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if c < 0x80 {
			if !strip || c == '\t' || c == '\n' || c == '\r' {
				dst = append(dst, c)
				i++
				continue
			}
			n, complete := 1, true
			if c == 0x1b {
				n, complete = escapeLen(s[i:])
			}
			if !complete && !final {
				return dst, i
			}
			st.stripped++
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			if !final && !utf8.FullRuneInString(s[i:]) {
				return dst, i
			}
			dst = append(dst, "\uFFFD"...)
			st.bad++
			i++
			continue
		}
		if strip && 0x80 <= r && r <= 0x9f {
			n, complete := c1Len(s[i:], r)
			if !complete && !final {
				return dst, i
			}
			st.stripped++
			i += n
			continue
		}
		dst = append(dst, s[i:i+size]...)
		i += size
	}
	return dst, i
}

// escapeLen measures the escape sequence at s[0] == ESC.
func escapeLen(s string) (int, bool) {
	if len(s) < 2 {
		return len(s), false
	}
	switch c := s[1]; {
	case c == '[':
		return csiLen(s, 2)
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		return stringSeqLen(s, 2)
	case 0x20 <= c && c <= 0x2f: // intermediates, then a final byte
		j := 2
		for j < len(s) && j < 16 && 0x20 <= s[j] && s[j] <= 0x2f {
			j++
		}
		if j == len(s) {
			return j, false
		}
		if 0x30 <= s[j] && s[j] <= 0x7e {
			return j + 1, true
		}
		return j, true
	case 0x30 <= c && c <= 0x7e:
		return 2, true
	}
	return 1, true // a lone ESC
}

// c1Len measures a C1 control (two bytes in UTF-8) and the sequence it
// introduces.
func c1Len(s string, r rune) (int, bool) {
	switch r {
	case 0x9b: // CSI
		return csiLen(s, 2)
	case 0x90, 0x98, 0x9d, 0x9e, 0x9f: // DCS, SOS, OSC, PM, APC
		return stringSeqLen(s, 2)
	}
	return 2, true
}

// csiLen: parameter and intermediate bytes, then a final byte; at most 64.
func csiLen(s string, j int) (int, bool) {
	start := j
	for j < len(s) && j-start < 64 {
		c := s[j]
		switch {
		case 0x40 <= c && c <= 0x7e:
			return j + 1, true
		case 0x20 <= c && c <= 0x3f:
			j++
		default:
			return j, true // malformed: drop the part read
		}
	}
	return j, j-start >= 64
}

// stringSeqLen: a control string ends at BEL, ST (ESC \ or C1 0x9c), a new
// ESC, or a newline (kept); at most 4096 bytes, so a missing terminator
// cannot swallow a whole output.
func stringSeqLen(s string, j int) (int, bool) {
	start := j
	for j < len(s) && j-start < 4096 {
		switch s[j] {
		case 0x07:
			return j + 1, true
		case '\n':
			return j, true
		case 0x1b:
			if j+1 == len(s) {
				return j, false
			}
			if s[j+1] == '\\' {
				return j + 2, true
			}
			return j, true
		case 0xc2:
			if j+1 == len(s) {
				return j, false
			}
			if s[j+1] == 0x9c {
				return j + 2, true
			}
		}
		j++
	}
	return j, j-start >= 4096
}
