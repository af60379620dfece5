package sanitize

import (
	"github.com/toold/toold/internal/strictjson"

	"unicode/utf16"
	"unicode/utf8"
)

// JSON string scanning, decoding and encoding on raw bytes, so that Output
// touches only the strings it changes and copies the rest verbatim.

// strAttention marks bytes that end the fast path inside a string.
var strAttention = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for c := 0x7f; c < 0x100; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// jstr describes a string token.
type jstr struct {
	end int  // index after the closing quote
	esc bool // has escapes: decode before scanning
	raw bool // raw control characters or invalid UTF-8: not valid JSON as is
	// ctl: DEL or a C1 control, valid JSON as is, but removed where the
	// policy strips control characters.
	ctl bool
}

// scanJSONString reads the string token whose opening quote is at i. ok is
// false for a malformed escape or a missing closing quote.
func scanJSONString(src []byte, i int) (t jstr, ok bool) {
	j := i + 1
	for j < len(src) {
		c := src[j]
		if !strAttention[c] {
			j++
			continue
		}
		switch {
		case c == '"':
			t.end = j + 1
			return t, true
		case c == '\\':
			t.esc = true
			n := escLen(src, j)
			if n == 0 {
				return t, false
			}
			j += n
		case c < 0x20:
			t.raw = true
			j++
		default: // DEL, or a byte of a multi-byte character
			r, size := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && size <= 1 {
				t.raw = true
			}
			t.ctl = t.ctl || isControl(r)
			j += size
		}
	}
	return t, false
}

// escLen validates the escape at src[j] == '\\' and returns its length.
func escLen(src []byte, j int) int {
	if j+1 >= len(src) {
		return 0
	}
	switch src[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if j+6 > len(src) {
			return 0
		}
		for _, h := range src[j+2 : j+6] {
			if !is(h, cHex) {
				return 0
			}
		}
		return 6
	}
	return 0
}

func hexVal(b []byte) rune {
	var r rune
	for _, h := range b {
		switch {
		case h >= 'a':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A':
			r = r<<4 | rune(h-'A'+10)
		default:
			r = r<<4 | rune(h-'0')
		}
	}
	return r
}

// decodeJSONString appends the decoded content of a scanned string token
// (quotes excluded) to dst. Escaped U+FFFD and lone surrogates count as
// bad: encoding/json writes "\ufffd" for each invalid byte it replaced
// when the tool's result was marshaled, which is how Output can tell the
// caller that a command printed binary.
func decodeJSONString(dst, content []byte, bad *int) []byte {
	for j := 0; j < len(content); {
		c := content[j]
		if c != '\\' {
			k := j + 1
			for k < len(content) && content[k] != '\\' {
				k++
			}
			dst = append(dst, content[j:k]...)
			j = k
			continue
		}
		e := content[j+1]
		if e != 'u' {
			dst = append(dst, unescape[e])
			j += 2
			continue
		}
		r := hexVal(content[j+2 : j+6])
		j += 6
		if utf16.IsSurrogate(r) {
			if j+6 <= len(content) && content[j] == '\\' && content[j+1] == 'u' {
				if r2 := utf16.DecodeRune(r, hexVal(content[j+2:j+6])); r2 != utf8.RuneError {
					dst = utf8.AppendRune(dst, r2)
					j += 6
					continue
				}
			}
			r = utf8.RuneError
		}
		if r == utf8.RuneError {
			*bad++
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// appendJSONString appends s as a JSON string (see strictjson.AppendString).
func appendJSONString(dst []byte, s string) []byte { return strictjson.AppendString(dst, s) }
