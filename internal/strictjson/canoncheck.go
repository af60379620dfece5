package strictjson

import "unicode/utf8"

// isCanonical reports whether data is one JSON value already written as
// Canonical would write it, so that Canonical can return it as it is: no
// writing, no allocation. Arguments are nearly always small objects a
// client or a model wrote compactly, and often with sorted names; the
// audit log hashes every call's (events.Recorder.ArgsHash), where the
// check costs a third of canonicalizing. It answers false for anything it
// is unsure of — any space, a name with an escape or a character outside
// ASCII, a number that is not a short integer, an escape JCS would write
// otherwise, invalid UTF-8 — and Canonical then writes the canonical form.
// FuzzCanonical holds it to jsontext's answer.
func isCanonical(data []byte) bool {
	// prev[d] is the last member name of the object open at depth d, to
	// check that names strictly increase (sorted, no duplicates).
	var prev [canonMaxDepth + 1][]byte
	var inObject [canonMaxDepth + 1]bool
	depth := 0
	i := 0
	// expect a value at i
value:
	if i >= len(data) {
		return false
	}
	switch data[i] {
	case '{', '[':
		if depth == canonMaxDepth {
			return false
		}
		object, closing := data[i] == '{', byte(']')
		if object {
			closing = '}'
		}
		depth++
		inObject[depth], prev[depth] = object, nil
		i++
		if i < len(data) && data[i] == closing {
			i++
			depth--
			goto next
		}
		if object {
			goto member
		}
		goto value
	case '"':
		n, ok := canonicalString(data[i+1:])
		if !ok {
			return false
		}
		i += 1 + n
	case 't':
		if !hasLiteral(data[i:], "true") {
			return false
		}
		i += 4
	case 'f':
		if !hasLiteral(data[i:], "false") {
			return false
		}
		i += 5
	case 'n':
		if !hasLiteral(data[i:], "null") {
			return false
		}
		i += 4
	default:
		n, ok := canonicalInteger(data[i:])
		if !ok {
			return false
		}
		i += n
	}
next:
	// after a value: the end, a comma, or a container's close
	if depth == 0 {
		return i == len(data)
	}
	if i >= len(data) {
		return false
	}
	switch data[i] {
	case ',':
		i++
		if inObject[depth] {
			goto member
		}
		goto value
	case '}':
		if !inObject[depth] {
			return false
		}
	case ']':
		if inObject[depth] {
			return false
		}
	default:
		return false
	}
	i++
	depth--
	goto next
member:
	// a member's name, then a colon, then its value
	if i >= len(data) || data[i] != '"' {
		return false
	}
	name, ok := asciiName(data[i+1:])
	if !ok || (prev[depth] != nil && string(name) <= string(prev[depth])) {
		return false
	}
	prev[depth] = name
	i += 2 + len(name)
	if i >= len(data) || data[i] != ':' {
		return false
	}
	i++
	goto value
}

// asciiName is a member name (b is after its opening quote) of printable
// ASCII without escapes, whose byte order is its UTF-16 order; ok false
// for any other.
func asciiName(b []byte) (name []byte, ok bool) {
	for i, ch := range b {
		switch {
		case ch == '"':
			return b[:i], true
		case ch == '\\' || ch < 0x20 || ch >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// canonicalString reports the length of a string's rest (b is after its
// opening quote), closing quote included, if JCS writes it as it is:
// valid UTF-8, and only the escapes JCS writes (\" \\ \b \f \n \r \t, and
// \u00xx in lower case for the other controls).
func canonicalString(b []byte) (int, bool) {
	ascii := true
	for i := 0; i < len(b); i++ {
		ch := b[i]
		switch {
		case ch == '"':
			return i + 1, ascii || utf8.Valid(b[:i])
		case ch < 0x20:
			return 0, false
		case ch >= 0x80:
			ascii = false
		case ch == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+6 > len(b) || b[i+2] != '0' || b[i+3] != '0' || !lowerHex(b[i+4]) || !lowerHex(b[i+5]) {
					return 0, false
				}
				switch v := unhex(b[i+4])<<4 | unhex(b[i+5]); {
				case v >= 0x20, v == '\b', v == '\f', v == '\n', v == '\r', v == '\t':
					return 0, false // JCS writes it as itself, or short
				}
				i += 5
			default:
				return 0, false // \/ is written /
			}
		}
	}
	return 0, false
}

// canonicalInteger is the length of an integer of at most 15 digits that
// is written as ECMAScript writes its value: no leading zero, no plus,
// not -0 (a fraction or an exponent is left to Canonical).
func canonicalInteger(b []byte) (int, bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	digits := i - start
	switch {
	case digits == 0 || digits > 15:
		return 0, false
	case b[start] == '0' && (digits > 1 || start > 0): // 01, -0
		return 0, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, false
	}
	return i, true
}

func hasLiteral(b []byte, lit string) bool { return len(b) >= len(lit) && string(b[:len(lit)]) == lit }

func lowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
