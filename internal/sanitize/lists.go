package sanitize

import (
	"strings"
	"sync"
)

// Byte lists: a secret written as the numbers of its bytes. The views of
// normalize.go decode runs and escapes inside a word; these are lists of
// items between separators, which the probe skips as it skips prose:
//
//   - hex in groups of 2, 4 or 8 digits separated by a space or a colon:
//     od -An -tx1, hexdump -C, xxd (with its offsets and ASCII columns),
//     "67:68:70";
//   - 0x items, 0x67, 0x68 (a C array), separated by commas or spaces;
//   - decimal byte values, 103, 104, 112 (String.fromCharCode, Python's
//     bytes([…])), separated by commas or spaces.
//
// A list of at least minListBytes bytes is scanned like a view, whatever
// it decodes to — a dump of a binary file holds its secrets among bytes
// that are not text, and lists are rare enough in clean text that
// scanning each costs little —, and a finding redacts the items it came from — each byte
// maps to its two hex digits, its 0x or decimal item — and, in a dump,
// the characters of the ASCII column that render the same bytes. Over a
// whole text (not a stream or a block of lines), a list goes on over
// lines: past a trailing comma, and in a dump past the ASCII column and
// the next line's offset.

// minListBytes is the shortest list worth decoding, as minB64Run is for
// runs: secrets are longer, and a short list of numbers is everywhere.
const minListBytes = 10

// listKind is the shape of a list's items.
type listKind uint8

const (
	listHex listKind = iota + 1
	list0x
	listDec
)

// mapped is a text derived from another (a decoded list, two joined
// words): each byte knows the span of the other it came from, and alt,
// when set, a second position that renders it (a dump's ASCII column).
type mapped struct {
	b          []byte
	start, end []int32
	alt        []int32
}

func (m *mapped) reset() {
	m.b, m.start, m.end, m.alt = m.b[:0], m.start[:0], m.end[:0], m.alt[:0]
}

// truncate drops the bytes from n on.
func (m *mapped) truncate(n int) {
	m.b, m.start, m.end, m.alt = m.b[:n], m.start[:n], m.end[:n], m.alt[:n]
}

func (m *mapped) put(c byte, from, to int) {
	m.b = append(m.b, c)
	m.start = append(m.start, int32(from))
	m.end = append(m.end, int32(to))
	m.alt = append(m.alt, -1)
}

// addFound maps the findings fs of m's text back to spans of sc.s: one
// per line they touch (a finding never swallows a line break), and the
// same for the alternative renderings. Findings wholly before split, or
// wholly from split on, are left out: the per-line scan finds them (split
// 0 keeps all).
func (sc *scanner) addFound(m *mapped, fs []finding, split int) {
	for _, f := range fs {
		if f.end <= split || f.start >= split && split > 0 {
			continue
		}
		sc.addPieces(m.start, m.end, f)
		if m.alt[f.start] >= 0 || m.alt[f.end-1] >= 0 {
			sc.addPieces(m.alt, nil, f)
		}
	}
}

// addPieces adds the span of sc.s that bytes f.start..f.end of a mapped
// text came from, cut at every line break between them. end nil means
// each byte is one byte of sc.s at start (and -1 for none).
func (sc *scanner) addPieces(start, end []int32, f finding) {
	a, b := -1, -1
	for k := f.start; k < f.end; k++ {
		s := int(start[k])
		if s < 0 {
			continue
		}
		e := s + 1
		if end != nil {
			e = int(end[k])
		}
		if a >= 0 && (s < b || strings.IndexByte(sc.s[b:s], '\n') >= 0) {
			sc.add(a, b, f.kind)
			a = -1
		}
		if a < 0 {
			a = s
		}
		b = max(b, e)
	}
	if a >= 0 {
		sc.add(a, b, f.kind)
	}
}

// listScratch is the reusable state of scanning lists.
type listScratch struct {
	m  mapped
	fs []finding
}

var listPool = sync.Pool{New: func() any { return new(listScratch) }}

// scanLists adds the findings of the byte lists in sc.s; across lets a
// list go on over line breaks.
//
// Lists are found from their digits. A secret is printable text, so each
// of its bytes is written with a digit first — hex 20 to 7e, 0x, decimal —
// and a list holding one has an item that starts with a digit right after
// a separator: that is where a list is entered (readList then goes back to
// the list's first item, and on through items of any kind). Prose has few
// digits, so the search skips eight bytes without one at a time.
func (sc *scanner) scanLists(across bool) {
	s := sc.s
	var ls *listScratch
	defer func() {
		if ls != nil {
			listPool.Put(ls)
		}
	}()
	for i := 1; ; {
		d := nextDigit(s, i)
		if d < 0 {
			return
		}
		j := d - 1 // the separator before the item, then a blank or a comma before that
		for j > 0 && d-j < 3 && (s[j] == ' ' || s[j] == ',') && (s[j-1] == ' ' || s[j-1] == ',') {
			j--
		}
		a := -1
		if listSepTab[s[j]] && j < d && itemAt(s, d) > 0 {
			a = itemBefore(s, j)
		}
		if a < 0 {
			// Not an item after a separator: no digit of this word is.
			i = run(s, d+1, cAlnum|cUnder, 256)
			continue
		}
		if ls == nil {
			ls = listPool.Get().(*listScratch)
		}
		ls.m.reset()
		end := readList(&ls.m, s, a, across)
		if len(ls.m.b) >= minListBytes {
			ls.fs = sc.d.scanText(unsafeString(ls.m.b), ls.fs[:0])
			sc.addFound(&ls.m, sc.d.merge(unsafeString(ls.m.b), ls.fs), 0)
		}
		i = max(end, d+1)
	}
}

// listSepTab marks the separators of list items.
var listSepTab = [256]bool{' ': true, ',': true, ':': true}

// nextDigit finds the first ASCII digit at or after i, eight bytes at a
// time where it can; -1 when there is none.
func nextDigit(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if hasDigit(load64(s, i)) != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if is(s[i], cDigit) {
			return i
		}
	}
	return -1
}

// itemBefore returns where the list item that ends at the separator s[j]
// starts, or -1.
func itemBefore(s string, j int) int {
	if j == 0 || !is(s[j-1], cHex) {
		return -1
	}
	a := runBack(s, j, cHex|cDigit, 8)
	if a >= 2 && (s[a-1] == 'x' || s[a-1] == 'X') && s[a-2] == '0' {
		a -= 2
	}
	if a > 0 && is(s[a-1], cAlnum|cUnder) || itemAt(s, a) != j-a {
		return -1
	}
	return a
}

// itemAt returns the length of the list item at s[i] (0 when there is
// none): hex digits (2, 4 or 8), 0x and one or two hex digits, or a
// decimal up to 255; each ends at a non-alphanumeric byte.
func itemAt(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	if s[i] == '0' && (at(s, i+1) == 'x' || at(s, i+1) == 'X') {
		e := run(s, i+2, cHex, 3)
		if e-i-2 >= 1 && e-i-2 <= 2 && !is(at(s, e), cAlnum) {
			return e - i
		}
		return 0
	}
	e := run(s, i, cHex, 9)
	if n := e - i; !is(at(s, e), cAlnum|cUnder) && (n == 2 || n == 4 || n == 8) {
		return n
	}
	e = run(s, i, cDigit, 4)
	if n := e - i; n >= 1 && n <= 3 && !is(at(s, e), cAlnum|cUnder) && at(s, e) != '.' && decValue(s[i:e]) <= 255 {
		return n
	}
	return 0
}

func decValue(d string) int {
	v := 0
	for i := range len(d) {
		v = v*10 + int(d[i]-'0')
	}
	return v
}

// readList decodes the list starting at k into m and returns where it
// ends. The first item sets the list's kind (and a hex list's width);
// the rest must match.
//
// A decimal list's two-digit items are hex items too: when one that is
// only hex follows them ("0 67 68 5f", the 0 an offset or a stray
// number), those items were the start of a hex list, and are read again
// as one. The switch happens once per list, so reading stays linear.
func readList(m *mapped, s string, k int, across bool) int {
	kind, width := listKindAt(s, k)
	i := k
	lineStart := len(m.b)
	hexFrom, hexMark := -1, 0 // a decimal list's trailing two-digit items, hex-separated: where they start in s and in m
	for {
		n := itemAt(s, i)
		if n == 0 || !sameItem(s, i, n, kind, width) {
			if kind == listDec && hexFrom >= 0 && n == 2 {
				m.truncate(hexMark)
				i, kind, width, hexFrom = hexFrom, listHex, 2, -1
				lineStart = min(lineStart, len(m.b))
				continue
			}
			return i
		}
		if kind == listDec && n != 2 {
			hexFrom = -1
		} else if kind == listDec && hexFrom < 0 {
			hexFrom, hexMark = i, len(m.b)
		}
		putItem(m, s, i, n, kind)
		j := i + n
		next, ok := listSep(s, j, kind)
		if hexNext, hexOK := listSep(s, j, listHex); kind == listDec && (!hexOK || hexNext != next) {
			hexFrom = -1
		}
		if ok && itemAt(s, next) > 0 {
			i = next
			continue
		}
		if !across {
			return j
		}
		hexFrom = -1
		// The end of this line's items: an ASCII column, and a list that
		// may go on on the next line.
		eol := strings.IndexByte(s[j:], '\n')
		if eol < 0 {
			asciiColumn(m, s, j, len(s), lineStart)
			return j
		}
		eol += j
		if !lineContinues(s, j, eol, kind) {
			return j
		}
		asciiColumn(m, s, j, eol, lineStart)
		i = nextLineItems(s, eol+1, kind)
		if i < 0 {
			return j
		}
		lineStart = len(m.b)
	}
}

func listKindAt(s string, i int) (listKind, int) {
	n := itemAt(s, i)
	switch {
	case s[i] == '0' && n > 2 && (s[i+1] == 'x' || s[i+1] == 'X'):
		return list0x, 0
	case run(s, i, cHex, 9)-i == n && (n == 2 || n == 4 || n == 8) && !(run(s, i, cDigit, 9)-i == n && n <= 3 && sepIsComma(s, i+n)):
		return listHex, n
	}
	return listDec, 0
}

// sepIsComma: decimal lists are written with commas, hex dumps never.
func sepIsComma(s string, i int) bool {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return at(s, i) == ','
}

func sameItem(s string, i, n int, kind listKind, width int) bool {
	switch kind {
	case listHex:
		return n == width && run(s, i, cHex, 9)-i == n
	case list0x:
		return n > 2 && (s[i+1] == 'x' || s[i+1] == 'X')
	}
	return n <= 3 && run(s, i, cDigit, 4)-i == n && decValue(s[i:i+n]) <= 255
}

// putItem appends the bytes of one item, each mapped to its digits.
func putItem(m *mapped, s string, i, n int, kind listKind) {
	switch kind {
	case listHex:
		for p := i; p+1 < i+n; p += 2 {
			m.put(unhex(s[p])<<4|unhex(s[p+1]), p, p+2)
		}
	case list0x:
		v := byte(0)
		for p := i + 2; p < i+n; p++ {
			v = v<<4 | unhex(s[p])
		}
		m.put(v, i, i+n)
	default:
		m.put(byte(decValue(s[i:i+n])), i, i+n)
	}
}

// listSep reads the separator after an item at j and returns where the
// next item would start: a hex list takes one or two spaces (hexdump -C
// doubles the one in the middle) or a colon; the others a comma, spaces,
// or both.
func listSep(s string, j int, kind listKind) (int, bool) {
	if kind == listHex {
		switch {
		case at(s, j) == ':' || at(s, j) == ' ' && at(s, j+1) != ' ':
			return j + 1, true
		case at(s, j) == ' ' && at(s, j+1) == ' ' && at(s, j+2) != ' ':
			return j + 2, true
		}
		return j, false
	}
	i := run(s, j, cSpace, 4)
	if at(s, i) == ',' {
		i = run(s, i+1, cSpace, 4)
	}
	return i, i > j
}

// lineContinues reports whether the rest of the line after a list's last
// item on it (s[j:eol]) lets the list go on: nothing but a comma and
// blanks, or, for a hex dump, an ASCII column after two spaces.
func lineContinues(s string, j, eol int, kind listKind) bool {
	rest := strings.TrimRight(s[j:eol], " \t\r")
	switch {
	case kind != listHex:
		return rest == ","
	case rest == "":
		return true
	}
	return strings.HasPrefix(s[j:], "  ")
}

// asciiColumn maps the bytes of one dump line (m.b[from:]) to their
// characters in the ASCII column in s[j:eol] (xxd's after two spaces,
// hexdump -C's between bars), when there is one of their number.
func asciiColumn(m *mapped, s string, j, eol, from int) {
	rest := s[j:eol]
	trimmed := strings.TrimLeft(rest, " ")
	off := j + len(rest) - len(trimmed)
	col := strings.TrimRight(trimmed, " \r")
	if len(col) >= 2 && col[0] == '|' && col[len(col)-1] == '|' {
		col, off = col[1:len(col)-1], off+1
	}
	if n := len(m.b) - from; n == 0 || len(col) != n {
		return
	}
	for k := range len(col) {
		m.alt[from+k] = int32(off + k)
	}
}

// nextLineItems skips the indentation and the offset column (xxd's
// "00000010:", od's and hexdump's digits before blanks) of the line at i
// and returns where its first item is, or -1.
func nextLineItems(s string, i int, kind listKind) int {
	i = run(s, i, cSpace, 64)
	if kind == listHex {
		if e := run(s, i, cHex, 17); e-i >= 4 && (at(s, e) == ':' || at(s, e) == ' ') {
			if itemAt(s, i) == 0 || at(s, e) == ':' || at(s, e+1) == ' ' {
				i = run(s, e+1, cSpace, 4)
			}
		}
	}
	if itemAt(s, i) == 0 {
		return -1
	}
	return i
}
