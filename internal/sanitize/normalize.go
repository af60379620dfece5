package sanitize

import (
	"html"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Decoded views.
//
// A secret written as %67%68%70%5F…, ghp\u005f…, ghp&#95;…, base64 of a
// config line, or split by a zero-width space passes every matcher, which
// sees bytes. For each line holding such an encoding the detector builds a
// view: the line with %XX, \uXXXX (and surrogate pairs), \u{…}, \UXXXXXXXX,
// \xXX, \\ and \/, HTML character references, and base64 or hex runs that
// decode to text decoded, and invisible characters removed. Every view byte
// remembers the span of the line it came from. The matchers run on the view
// too, and a finding there redacts the original span: the escapes, or the
// base64 quanta (hex pairs), covering it. A view of a view is decoded once
// more (base64 of %-encoded text and the like): maxViewDepth levels.
//
// A line without any of these costs one probe, 8 bytes at a time, and
// nothing else; text without newlines is one line.

const (
	maxViewDepth = 2
	// minB64Run is the shortest base64 or hex run worth decoding: 15
	// bytes of base64, 10 of hex. Shorter secrets in base64 are found
	// without a view by the assignment matchers (the run is a value with
	// digits or symbols).
	minB64Run = 20
	// maxViewText bounds the text views are built for, so offsets fit an
	// int32 (sanitized texts are capped far below this).
	maxViewText = 1 << 30
)

// Byte classes of the view scan.
const (
	nEsc uint8 = 1 << iota // may start an escape or an invisible character
	nB64                   // base64, standard or URL alphabet, without padding
)

var ntab = func() (t [256]uint8) {
	for _, c := range "%\\&" {
		t[c] = nEsc
	}
	// Lead bytes of the invisible characters removed: U+00AD (C2), U+200B–
	// U+206F (E2), U+FE00–U+FE0F and U+FEFF (EF).
	t[0xC2], t[0xE2], t[0xEF] = nEsc, nEsc, nEsc
	for c := 0; c < 256; c++ {
		if is(byte(c), cAlnum|cPlus|cSlash|cDash|cUnder) {
			t[c] |= nB64
		}
	}
	return t
}()

// b64val maps both base64 alphabets to their 6-bit values; 0xff elsewhere.
var b64val = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(std) {
		t[std[i]] = byte(i)
	}
	t['-'], t['_'] = 62, 63
	return t
}()

// invisible reports whether r is removed from a view: a zero-width or
// formatting character that renders as nothing and splits a token for a
// byte matcher.
func invisible(r rune) bool {
	switch {
	case r == 0x00AD, r == 0xFEFF: // soft hyphen, zero-width no-break space (BOM)
		return true
	case 0x200B <= r && r <= 0x200F: // ZWSP, ZWNJ, ZWJ, LRM, RLM
		return true
	case 0x202A <= r && r <= 0x202E, 0x2060 <= r && r <= 0x2064, 0x2066 <= r && r <= 0x2069:
		return true // bidi embeddings, word joiner, invisible operators, bidi isolates
	case 0xFE00 <= r && r <= 0xFE0F: // variation selectors
		return true
	}
	return false
}

// view is a decoded copy of a text; start[i] and end[i] give the span of
// the text that byte i of the view came from.
type view struct {
	b          []byte
	start, end []int32
	tmp        []byte // decoded bytes of one escape or run
}

// reset empties v and makes room for a view of n bytes (a view is rarely
// longer than its text): growing the maps byte by byte over a long line
// cost more than decoding it.
func (v *view) reset(n int) {
	v.b = slices.Grow(v.b[:0], n)
	v.start = slices.Grow(v.start[:0], n)
	v.end = slices.Grow(v.end[:0], n)
}

// extend lengthens the span maps by n and returns where the new entries
// start.
func (v *view) extend(n int) int {
	k := len(v.start)
	v.start = slices.Grow(v.start, n)[:k+n]
	v.end = slices.Grow(v.end, n)[:k+n]
	return k
}

// copyIdentity appends s[from:to] unchanged.
func (v *view) copyIdentity(s string, from, to int) {
	v.b = append(v.b, s[from:to]...)
	k := v.extend(to - from)
	start, end := v.start[k:], v.end[k:]
	for i := range start {
		start[i], end[i] = int32(from+i), int32(from+i+1)
	}
}

// put appends decoded bytes that all came from s[from:to].
func (v *view) put(dec []byte, from, to int) {
	v.b = append(v.b, dec...)
	k := v.extend(len(dec))
	start, end := v.start[k:], v.end[k:]
	for i := range start {
		start[i], end[i] = int32(from), int32(to)
	}
}

// putRun appends the bytes decoded from the run s[from:to], each mapped
// to the characters that encode it: a base64 quantum (4 characters for 3
// bytes), a base32 one (8 for 5) or a hex pair. A finding then redacts
// the quanta that hold any of its bytes and no more: the rest of the run
// encodes none of it, and a document in base64 with one address in it
// keeps the rest.
func (v *view) putRun(dec []byte, from, to int, enc runEncoding) {
	v.b = append(v.b, dec...)
	at := v.extend(len(dec))
	per, chars := enc.quantum()
	for k := range dec {
		a := from + k/per*chars
		b := a + chars
		if b > to || k == len(dec)-1 {
			b = to // the last quantum takes the padding
		}
		v.start[at+k], v.end[at+k] = int32(a), int32(b)
	}
}

// runEncoding is how a run is decoded.
type runEncoding uint8

const (
	encBase64 runEncoding = iota
	encHex
	encBase32
)

// quantum is how many bytes an encoding's quantum holds, in how many
// characters.
func (e runEncoding) quantum() (bytes, chars int) {
	switch e {
	case encHex:
		return 1, 2
	case encBase32:
		return 5, 8
	}
	return 3, 4
}

// encodingOf says how a run reads: hex when it is all hex digits, base32
// when it is all of base32's alphabet (A-Z, 2-7: RFC 4648, as base32(1)
// writes it) and its samples read as text that way, else base64.
func encodingOf(run string) runEncoding {
	switch {
	case allHex(run):
		return encHex
	case allBase32(run) && sampled(run, 8, b32Prefix):
		return encBase32
	}
	return encBase64
}

// decode builds the view of s. With probe it builds nothing and returns
// the index of the first change at or after from (-1 when there is none);
// otherwise it decodes all of s and returns 0 when the view differs from
// s, -1 when it does not.
func (v *view) decode(s string, from int, probe bool) int {
	if !probe {
		v.reset(len(s))
	}
	done, changed := 0, false
	floor := from // a run starts at or after it (after the last escape)
	slow := from  // bytes before it are looked at one by one
	for i := from; i < len(s); {
		if i >= slow && i+8 <= len(s) {
			if skippable(s, i) {
				i += 8
				continue
			}
			slow = i + 8
		}
		k := ntab[s[i]]
		if k == 0 {
			i++
			continue
		}
		var end int
		if k&nB64 != 0 {
			// A skipped word may have held the start of this run.
			for i > floor && ntab[s[i-1]]&nB64 != 0 {
				i--
			}
			j := i + 1
			for j < len(s) && ntab[s[j]]&nB64 != 0 {
				j++
			}
			if j-i < minB64Run || !sampledText(s[i:j]) {
				i, floor = j, j
				continue
			}
			if probe {
				return i // decoding settles it; a probe only looks
			}
			enc := encodingOf(s[i:j])
			v.tmp, end = decodeRun(v.tmp[:0], s, i, j, enc)
			if end == i {
				i, floor = j, j
				continue
			}
			v.copyIdentity(s, done, i)
			v.putRun(v.tmp, i, end, enc)
			done, i, changed, floor = end, end, true, end
			continue
		} else if v.tmp, end = escapeAt(v.tmp[:0], s, i); end == i {
			i++
			continue
		}
		if probe {
			return i
		}
		v.copyIdentity(s, done, i)
		v.put(v.tmp, i, end)
		done, i, changed, floor = end, end, true, end
	}
	if probe || !changed {
		return -1
	}
	v.copyIdentity(s, done, len(s))
	return 0
}

// skippable reports whether s[i:i+8] holds no byte that may start an
// escape or an invisible character and is not all base64: then no change
// starts in it, since a run of minB64Run covers a whole word wherever
// the word starts.
func skippable(s string, i int) bool {
	x := load64(s, i)
	const pct, amp, bsl = ones * '%', ones * '&', ones * '\\'
	a, b, c := x^pct, x^amp, x^bsl
	if ((a-ones)&^a|(b-ones)&^b|(c-ones)&^c|x)&highs != 0 {
		return false
	}
	// A byte below '+' (space, tab, newline, quotes, brackets…) is not
	// base64: the common case, without the table.
	if (x-ones*'+')&^x&highs != 0 {
		return true
	}
	return ntab[s[i]]&ntab[s[i+1]]&ntab[s[i+2]]&ntab[s[i+3]]&ntab[s[i+4]]&ntab[s[i+5]]&ntab[s[i+6]]&ntab[s[i+7]]&nB64 == 0
}

// escapeAt decodes the escape or invisible character at s[i] (whose byte
// class is nEsc), appending its bytes to buf. end is where it ends, i when
// there is none.
func escapeAt(buf []byte, s string, i int) (_ []byte, end int) {
	switch c := s[i]; c {
	case '%':
		if hi, lo := unhex(at(s, i+1)), unhex(at(s, i+2)); hi|lo < 16 {
			return append(buf, hi<<4|lo), i + 3
		}
	case '\\':
		return backslash(buf, s, i)
	case '&':
		return entity(buf, s, i)
	default: // a lead byte: 0xC2, 0xE2 or 0xEF
		if r, n := utf8.DecodeRuneInString(s[i:]); invisible(r) {
			return buf, i + n
		}
	}
	return buf, i
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}

// hexRune reads exactly n hex digits at s[i:]; ok is false when they are
// not all there.
func hexRune(s string, i, n int) (r rune, ok bool) {
	if i+n > len(s) {
		return 0, false
	}
	for _, c := range []byte(s[i : i+n]) {
		d := unhex(c)
		if d > 15 {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// appendRune appends r unless it is invisible; surrogates and invalid code
// points are not decoded (ok false).
func appendRune(buf []byte, r rune) ([]byte, bool) {
	if !utf8.ValidRune(r) {
		return buf, false
	}
	if invisible(r) {
		return buf, true
	}
	return utf8.AppendRune(buf, r), true
}

// backslash decodes \uXXXX (a surrogate pair as one character), \u{…},
// \UXXXXXXXX, \xXX, \\ and \/. Other escapes (\n, \t…) stay: decoding them
// would join or split lines, which no secret needs.
func backslash(buf []byte, s string, i int) ([]byte, int) {
	switch at(s, i+1) {
	case 'u':
		if at(s, i+2) == '{' {
			j := strings.IndexByte(s[i+3:min(len(s), i+10)], '}') + i + 3 // at most 6 digits
			if j > i+3 {
				if r, ok := hexRune(s, i+3, j-i-3); ok {
					if out, ok := appendRune(buf, r); ok {
						return out, j + 1
					}
				}
			}
			return buf, i
		}
		r, ok := hexRune(s, i+2, 4)
		if !ok {
			return buf, i
		}
		end := i + 6
		if 0xD800 <= r && r < 0xDC00 && at(s, end) == '\\' && at(s, end+1) == 'u' {
			if lo, ok := hexRune(s, end+2, 4); ok && 0xDC00 <= lo && lo < 0xE000 {
				r, end = 0x10000+(r-0xD800)<<10+(lo-0xDC00), end+6
			}
		}
		if out, ok := appendRune(buf, r); ok {
			return out, end
		}
	case 'U':
		if r, ok := hexRune(s, i+2, 8); ok {
			if out, ok := appendRune(buf, r); ok {
				return out, i + 10
			}
		}
	case 'x':
		if hi, lo := unhex(at(s, i+2)), unhex(at(s, i+3)); hi|lo < 16 {
			return append(buf, hi<<4|lo), i + 4
		}
	case '\\', '/':
		return append(buf, s[i+1]), i + 2
	}
	return buf, i
}

// entity decodes an HTML character reference: &#NNN; and &#xHH; (the
// semicolon optional, as browsers read them) and the named ones of HTML5
// (with their semicolon).
func entity(buf []byte, s string, i int) ([]byte, int) {
	j := i + 1
	if at(s, j) == '#' {
		j++
		base := rune(10)
		if c := at(s, j); c == 'x' || c == 'X' {
			base, j = 16, j+1
		}
		var r rune
		k := j
		for ; k < len(s) && k-j < 8; k++ {
			d := unhex(s[k])
			if d >= byte(base) {
				break
			}
			r = r*base + rune(d)
		}
		if k == j {
			return buf, i
		}
		if at(s, k) == ';' {
			k++
		}
		if out, ok := appendRune(buf, r); ok && r != 0 {
			return out, k
		}
		return buf, i
	}
	k := j
	for k < len(s) && k-j < 32 && is(s[k], cAlnum) {
		k++
	}
	if k == j || at(s, k) != ';' {
		return buf, i
	}
	ref := s[i : k+1]
	dec := html.UnescapeString(ref)
	if dec == ref {
		return buf, i
	}
	for _, r := range dec {
		buf, _ = appendRune(buf, r)
	}
	return buf, k + 1
}

// decodeRun decodes the base64 or hex run s[i:j] (with up to two '='
// after it) when the result reads as text. end is the end of the run and
// its padding, or i when it does not decode to text.
func decodeRun(buf []byte, s string, i, j int, enc runEncoding) (_ []byte, end int) {
	run := s[i:j]
	if enc == encBase32 {
		return decodeBase32(buf, s, i, j)
	}
	if enc == encHex {
		if len(run)%2 != 0 {
			return buf, i
		}
		for k := 0; k+1 < len(run); k += 2 {
			buf = append(buf, unhex(run[k])<<4|unhex(run[k+1]))
		}
		if !mostlyText(buf) {
			return buf[:0], i
		}
		return buf, j
	}
	end = j
	for end < len(s) && end < j+2 && s[end] == '=' {
		end++
	}
	n := len(run) &^ 3
	for k := 0; k < n; k += 4 {
		x := uint32(b64val[run[k]])<<18 | uint32(b64val[run[k+1]])<<12 | uint32(b64val[run[k+2]])<<6 | uint32(b64val[run[k+3]])
		buf = append(buf, byte(x>>16), byte(x>>8), byte(x))
	}
	switch tail := run[n:]; len(tail) { // 1 left over is not base64: dropped
	case 2:
		buf = append(buf, b64val[tail[0]]<<2|b64val[tail[1]]>>4)
	case 3:
		x := uint32(b64val[tail[0]])<<12 | uint32(b64val[tail[1]])<<6 | uint32(b64val[tail[2]])
		buf = append(buf, byte(x>>10), byte(x>>2))
	}
	if !mostlyText(buf) {
		return buf[:0], i
	}
	return buf, end
}

func allHex(s string) bool {
	for i := range len(s) {
		if !is(s[i], cHex) {
			return false
		}
	}
	return true
}

// sampledText is the cheap test before decoding a run: its first 6
// bytes, and 6 at a quarter, half and three quarters of a long run, read
// as text. Random bytes pass one test in 30; the header of a binary format
// may pass the first, not the rest.
func sampledText(run string) bool {
	switch encodingOf(run) {
	case encHex:
		return len(run)%2 == 0 && sampled(run, 2, hexPrefix)
	case encBase32:
		return true // encodingOf sampled it
	}
	return sampled(run, 4, b64Prefix)
}

// sampled runs the samples of a run, aligned to unit, through prefix.
func sampled(run string, unit int, prefix func(string) [6]byte) bool {
	for _, k := range samples(len(run), unit) {
		if !textPrefix(prefix(run[k:])) {
			return false
		}
	}
	return true
}

// allBase32 reports whether s is all of base32's alphabet.
func allBase32(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('A' <= c && c <= 'Z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

// b32Prefix decodes the first 10 characters of a base32 run (6 bytes).
func b32Prefix(run string) (b [6]byte) {
	var x uint64
	for k := range 10 {
		x = x<<5 | uint64(b32val(run[k]))
	}
	x >>= 2 // 50 bits, 48 of them whole bytes
	for k := range 6 {
		b[k] = byte(x >> (40 - 8*k))
	}
	return b
}

func b32val(c byte) byte {
	if c >= 'A' {
		return c - 'A'
	}
	return c - '2' + 26
}

// decodeBase32 decodes the base32 run s[i:j] (with up to six '=' after
// it) when the result reads as text; end as decodeRun's.
func decodeBase32(buf []byte, s string, i, j int) (_ []byte, end int) {
	run := s[i:j]
	end = j
	for end < len(s) && end < j+6 && s[end] == '=' {
		end++
	}
	var x uint64
	bits := 0
	for k := range len(run) {
		x = x<<5 | uint64(b32val(run[k]))
		if bits += 5; bits >= 8 {
			bits -= 8
			buf = append(buf, byte(x>>bits))
		}
	}
	if !mostlyText(buf) {
		return buf[:0], i
	}
	return buf, end
}

// samples returns where the samples of a run of n characters start,
// aligned to unit (a base64 quantum or a hex byte), each leaving 12
// characters.
func samples(n, unit int) [4]int {
	var at [4]int
	for q := range at {
		k := n * q / 4 / unit * unit
		at[q] = min(k, (n-12)/unit*unit)
	}
	return at
}

// b64Prefix decodes the first 8 characters of a run (6 bytes) into a
// word, the cheap test before decoding a whole run.
func b64Prefix(run string) (b [6]byte) {
	var x uint64
	for k := range 8 {
		x = x<<6 | uint64(b64val[run[k]])
	}
	for k := range 6 {
		b[k] = byte(x >> (40 - 8*k))
	}
	return b
}

func hexPrefix(run string) (b [6]byte) {
	for k := range 6 {
		b[k] = unhex(run[2*k])<<4 | unhex(run[2*k+1])
	}
	return b
}

// textPrefix: at least 5 of the 6 bytes are printable ASCII or
// whitespace. Random bytes pass 3% of the time.
func textPrefix(b [6]byte) bool {
	bad := 0
	for _, c := range b {
		if !printableASCII(c) {
			bad++
		}
	}
	return bad <= 1
}

func printableASCII(c byte) bool {
	return 0x20 <= c && c < 0x7f || c == '\t' || c == '\n' || c == '\r'
}

// mostlyText: valid UTF-8, printable, at most one byte in 16 otherwise.
func mostlyText(b []byte) bool {
	bad := 0
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			if !printableASCII(c) {
				bad++
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError {
			bad++
		}
		i += n
	}
	return bad*16 <= len(b)
}

// viewScratch is the reusable state of scanning one text's views.
type viewScratch struct {
	v     [maxViewDepth]view
	probe view
	fs    []finding
}

var viewPool = sync.Pool{New: func() any { return new(viewScratch) }}

// scanViews adds the findings of the decoded views of every line of sc.s
// that has one, mapped back to the spans of sc.s they came from.
func (sc *scanner) scanViews() {
	s := sc.s
	if len(s) > maxViewText {
		return
	}
	var probe view
	i := probe.decode(s, 0, true)
	if i < 0 {
		return
	}
	vs := viewPool.Get().(*viewScratch)
	defer viewPool.Put(vs)
	for i >= 0 {
		ls := strings.LastIndexByte(s[:i], '\n') + 1
		le := indexByteFrom(s, '\n', i)
		if le < 0 {
			le = len(s)
		}
		sc.scanLine(vs, ls, s[ls:le])
		i = vs.probe.decode(s, le, true)
	}
}

// scanLine scans the views of one line starting at base.
func (sc *scanner) scanLine(vs *viewScratch, base int, line string) {
	text := line
	for depth := range maxViewDepth {
		v := &vs.v[depth]
		if v.decode(text, 0, false) < 0 {
			return
		}
		text = unsafeString(v.b)
		vs.fs = sc.d.scanText(text, vs.fs[:0])
		for _, f := range sc.d.merge(text, vs.fs) {
			a, b := v.start[f.start], v.end[f.end-1]
			for up := depth - 1; up >= 0; up-- {
				a, b = vs.v[up].start[a], vs.v[up].end[b-1]
			}
			sc.add(base+int(a), base+int(b), f.kind)
		}
	}
}

// scanText runs every matcher on s (no views, no streaming state) and
// appends the raw findings to out.
func (d *detector) scanText(s string, out []finding) []finding {
	sc := scanner{d: d, s: s, out: out}
	if d.on[kPrivateKey] || d.on[kGCPServiceAccount] {
		sc.scanPEM(false)
	}
	sc.scanTokens()
	sc.scanAssignments()
	sc.scanPII()
	for i := range d.customs {
		sc.scanCustom(&d.customs[i])
	}
	return sc.out
}
