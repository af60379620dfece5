package sanitize

import "strings"

// Byte classes for the hand-written matchers. A table lookup per byte is
// what keeps clean text fast: no regexp runs unless an anchor was found.
const (
	cDigit uint16 = 1 << iota
	cUpper
	cLower
	cUnder
	cDash
	cPlus
	cSlash
	cEq
	cDot
	cHexLetter
	cSpace // space and tab, never a newline
)

const (
	cAlpha  = cUpper | cLower
	cAlnum  = cDigit | cAlpha
	cWord   = cAlnum | cUnder
	cB64URL = cAlnum | cUnder | cDash
	cB64    = cAlnum | cPlus | cSlash | cEq
	cHex    = cDigit | cHexLetter
)

var ctab = func() (t [256]uint16) {
	for c := '0'; c <= '9'; c++ {
		t[c] |= cDigit
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= cUpper
		t[c+'a'-'A'] |= cLower
	}
	for _, c := range "abcdefABCDEF" {
		t[c] |= cHexLetter
	}
	t['_'] |= cUnder
	t['-'] |= cDash
	t['+'] |= cPlus
	t['/'] |= cSlash
	t['='] |= cEq
	t['.'] |= cDot
	t[' '] |= cSpace
	t['\t'] |= cSpace
	return t
}()

func is(c byte, m uint16) bool { return ctab[c]&m != 0 }

// at returns s[i], or 0 (which belongs to no class: a boundary) outside s.
func at(s string, i int) byte {
	if i < 0 || i >= len(s) {
		return 0
	}
	return s[i]
}

// run returns the end of the run of bytes of class m starting at i, looking
// at most limit bytes ahead.
func run(s string, i int, m uint16, limit int) int {
	end := min(len(s), i+limit)
	for i < end && ctab[s[i]]&m != 0 {
		i++
	}
	return i
}

// runBack returns the start of the run of class m that ends at i
// (exclusive), looking at most limit bytes back.
func runBack(s string, i int, m uint16, limit int) int {
	stop := max(0, i-limit)
	for i > stop && ctab[s[i-1]]&m != 0 {
		i--
	}
	return i
}

// lower folds an ASCII letter.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// indexFrom is strings.Index from an offset, returning an absolute index.
func indexFrom(s, sub string, from int) int {
	if from >= len(s) {
		return -1
	}
	i := strings.Index(s[from:], sub)
	if i < 0 {
		return -1
	}
	return from + i
}

// indexByteFrom is strings.IndexByte from an offset (absolute index).
func indexByteFrom(s string, c byte, from int) int {
	if from >= len(s) {
		return -1
	}
	i := strings.IndexByte(s[from:], c)
	if i < 0 {
		return -1
	}
	return from + i
}

// load64 reads 8 bytes of s at i, little-endian (the compiler merges the
// loads into one).
func load64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasDigit is nonzero when a byte of x is an ASCII digit (SWAR "has
// between 0x2f and 0x3a"; bytes >= 0x80 never count).
func hasDigit(x uint64) uint64 {
	const m, n = 0x2f, 0x3a
	return (ones*(127+n) - x&(ones*127)) & ^x & (x&(ones*127) + ones*(127-m)) & highs
}

// hasControlOrHigh is nonzero when a byte of x is below 0x20, is DEL, or
// has its high bit set.
func hasControlOrHigh(x uint64) uint64 {
	lt20 := (x - ones*0x20) & ^x & highs
	del := x ^ (ones * 0x7f)
	isDel := (del - ones) & ^del & highs
	return lt20 | isDel | x&highs
}

// indexRare finds needle from an offset by searching for its byte at k,
// chosen rare in ordinary text: strings.Index keys on the first byte, and
// for "eyJ" that is the most common letter of English.
func indexRare(s, needle string, k, from int) int {
	c := needle[k]
	for i := from + k; i < len(s); {
		j := strings.IndexByte(s[i:], c)
		if j < 0 {
			return -1
		}
		if p := i + j - k; p >= from && p+len(needle) <= len(s) && s[p:p+len(needle)] == needle {
			return p
		}
		i += j + 1
	}
	return -1
}
