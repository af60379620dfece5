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

// TailUTF8 is at most n bytes of the end of s, cut after a character that
// would not fit whole (the counterpart of CutUTF8, for the end of an
// output). n must not be negative.
func TailUTF8[T ~string | ~[]byte](s T, n int) T {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
