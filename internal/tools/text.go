package tools

import "unicode/utf8"

// CutUTF8 is at most n bytes of the start of s, cut before a character
// that would not fit whole, so a bounded message or line stays valid
// UTF-8 when s is. n must not be negative.
func CutUTF8[T ~string | ~[]byte](s T, n int) T {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
