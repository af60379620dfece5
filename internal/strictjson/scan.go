package strictjson

// Byte-level scanning shared by the code that walks JSON text in place
// rather than decoding it (the output sanitizer, the MCP fast path's
// reader, the audit log's canonical writer).

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, tab, line feed, carriage return).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// NumberEnd checks the JSON number grammar (RFC 8259 section 6) from i and
// returns the index just past the number; ok is false when no number
// starts at i. It reads as far as the grammar allows and no further:
// what follows is the caller's to judge.
func NumberEnd(b []byte, i int) (end int, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		if i = digitsEnd(b, i+1); i < 0 {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digitsEnd(b, i); i < 0 {
			return 0, false
		}
	}
	return i, true
}

// digitsEnd is the index after the run of digits at b[i], or -1 if there
// is none.
func digitsEnd(b []byte, i int) int {
	start := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}
