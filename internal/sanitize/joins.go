package sanitize

import "strings"

// Words split across a line break. A token printed in two pieces (fold,
// a wrapped log line, echo twice), or hex or base64 wrapped at a fixed
// width (xxd -p, base64 without -w0), passes every matcher, which sees
// lines. Over a whole text — not a stream or a block of lines, which are
// judged line by line — the word that ends a line and the word that
// starts the next (after its indentation) are joined and scanned again,
// by the token matchers and the decoded views; a finding that spans the
// join redacts its piece on each line, and the line break stays.

// minJoin is the shortest joined word worth scanning: the shortest token
// (an AWS key id) is 20 characters, and so is the shortest run decoded.
const minJoin = 20

// maxJoinSide bounds each side of a join: longer than any token, and than
// the lines of a wrapped encoding (76 for base64, 60 for xxd -p).
const maxJoinSide = 512

// cJoin is what a split word is made of: tokens' characters, and those of
// base64 and hex.
const cJoin = cAlnum | cUnder | cDash | cDot | cSlash | cPlus | cEq

// scanJoins adds the findings of the words that span a line break.
func (sc *scanner) scanJoins() {
	s := sc.s
	var js *listScratch
	defer func() {
		if js != nil {
			listPool.Put(js)
		}
	}()
	for i := 0; ; {
		nl := indexByteFrom(s, '\n', i)
		if nl < 0 {
			return
		}
		i = nl + 1
		le := nl
		if le > 0 && s[le-1] == '\r' {
			le--
		}
		if le > 0 && s[le-1] == '\\' {
			le-- // a line continued (a shell's, a Makefile's, C's): the word goes on
		}
		r0 := lineStart(s, nl+1)
		if le == 0 || r0 >= len(s) || !is(s[r0], cJoin) {
			continue
		}
		if s[le-1] == ']' {
			sc.continuedMarker(le, r0)
			continue
		}
		if !is(s[le-1], cJoin) {
			continue
		}
		js = sc.join(js, runBack(s, le, cJoin, maxJoinSide), le, r0, run(s, r0, cJoin, maxJoinSide))
	}
}

// continuedMarker handles a line that ends in a marker, followed by a
// line that is a single word of token characters: a text whose lines were
// redacted one by one first (read_file's and grep's, through the line
// redactor) may have judged the first piece of a split token a secret on
// its own (GITHUB_TOKEN=ghp_…, an assignment), and the join then sees a
// marker where that piece was. The word is redacted as the marker's kind
// when it looks like the rest of a secret: 8 characters or more with
// upper- and lower-case letters and digits, or 20 or more with letters
// and digits, alone on its line but for closing quotes and punctuation.
func (sc *scanner) continuedMarker(le, r0 int) {
	s := sc.s
	kind, ok := sc.markerBefore(le)
	if !ok {
		return
	}
	b := run(s, r0, cJoin, maxJoinSide)
	e := b
	for e < len(s) && strings.IndexByte(" \t\r\"',;)]}", s[e]) >= 0 {
		e++
	}
	if (e < len(s) && s[e] != '\n') || !tokenLike(s[r0:b]) {
		return
	}
	sc.add(r0, b, kind)
}

// markerBefore is the kind of the marker that ends at i, if one does.
func (sc *scanner) markerBefore(i int) (kindID, bool) {
	s := sc.s
	from := max(0, i-48)
	k := strings.LastIndexByte(s[from:i], '[')
	if k < 0 || s[i-1] != ']' || !strings.HasPrefix(s[from+k:i], markerPrefix) {
		return 0, false
	}
	return sc.d.kindNamed(s[from+k+len(markerPrefix) : i-1])
}

// tokenLike says whether w looks like a piece of a random secret.
func tokenLike(w string) bool {
	var upper, lower, digit bool
	for i := 0; i < len(w); i++ {
		upper = upper || 'A' <= w[i] && w[i] <= 'Z'
		lower = lower || 'a' <= w[i] && w[i] <= 'z'
		digit = digit || is(w[i], cDigit)
	}
	return len(w) >= 8 && upper && lower && digit || len(w) >= 20 && (upper || lower) && digit
}

// lineStart is where the text of the line at i starts: past its
// indentation and, in a numbered listing (read_file's lines, cat -n, nl),
// past the number and its tab and the indentation after them (issue 38,
// finding 4: read_file's numbers stood between the pieces of a token).
func lineStart(s string, i int) int {
	r := run(s, i, cSpace, 64)
	if d := run(s, r, cDigit, 12); d > r && d < len(s) && s[d] == '\t' {
		r = run(s, d+1, cSpace, 64)
	}
	return r
}

// join scans the word joined from s[a:le] and s[r0:b] and adds what spans
// the join, redacted in its two pieces (what lies between them stays);
// js is scratch, taken from the pool when nil and returned for reuse.
func (sc *scanner) join(js *listScratch, a, le, r0, b int) *listScratch {
	s := sc.s
	if le-a+b-r0 < minJoin {
		return js
	}
	if js == nil {
		js = listPool.Get().(*listScratch)
	}
	// The joined word first; where each byte came from only when
	// something in it spans the join.
	m := &js.m
	m.b = append(append(m.b[:0], s[a:le]...), s[r0:b]...)
	sub := scanner{d: sc.d, s: unsafeString(m.b), out: js.fs[:0]}
	sub.scanTokens()
	js.fs = sub.joinedRun(le - a)
	if !spansJoin(js.fs, le-a) {
		return js
	}
	m.reset()
	for k := a; k < le; k++ {
		m.put(s[k], k, k+1)
	}
	for k := r0; k < b; k++ {
		m.put(s[k], k, k+1)
	}
	// A finding across the join is redacted as its two pieces, so what
	// lies between them (a line break, quotes, a key) stays; one on either
	// side alone is the per-line scan's.
	split := le - a
	for _, f := range sc.d.merge(unsafeString(m.b), js.fs) {
		if f.start < split && f.end > split {
			sc.addPieces(m.start, m.end, finding{start: f.start, end: split, kind: f.kind})
			sc.addPieces(m.start, m.end, finding{start: split, end: f.end, kind: f.kind})
		}
	}
	return js
}

// Quoted pieces (issue 38, finding 4). A token split between two string
// literals — `"ghp_…" +` and `"…"` on the next line of source code, a
// shell's 'ghp_…'\ and '…', Python's or C's adjacent literals, two
// string fields of a JSON text (`"a":"ghp_…","b":"…"`, compact or one
// per line) — has a quote and glue between its pieces, not a bare line
// break, and a JSON text inside a string value (a file read_file returns,
// a command's stdout) is text, not values the JSON walker joins. So the
// word that ends a quoted string and the word that starts the next one
// are joined too, when all that lies between the two quotes is glue:
// blanks, line breaks (over a whole text only), the operators that join
// literals (+ , . & | \ ( ) ;) and at most one object key ("name":).

// maxGlue bounds what may lie between the pieces; maxKey a key in it.
const (
	maxGlue = 48
	maxKey  = 64
)

// scanQuoted adds the findings of the words split between two quoted
// strings; across lets the glue hold line breaks.
func (sc *scanner) scanQuoted(across bool) {
	s := sc.s
	var js *listScratch
	defer func() {
		if js != nil {
			listPool.Put(js)
		}
	}()
	// The next quote of each kind, each found by IndexByte (vectorized).
	dq, sq := indexByteFrom(s, '"', 0), indexByteFrom(s, '\'', 0)
	for {
		var q int
		switch {
		case dq < 0 && sq < 0:
			return
		case sq < 0 || dq >= 0 && dq < sq:
			q, dq = dq, indexByteFrom(s, '"', dq+1)
		default:
			q, sq = sq, indexByteFrom(s, '\'', sq+1)
		}
		if q == 0 || !is(s[q-1], cJoin) && s[q-1] != ']' {
			continue
		}
		open, keyed := glue(s, q+1, across)
		if open < 0 {
			continue
		}
		r0 := open + 1
		if s[q-1] == ']' {
			// A string the line redactor emptied but for its marker, then
			// joined to a string that is one token-like word: the rest of
			// it (see continuedMarker). Not past a key: the next field of
			// a JSON text after a redacted one is as often an id.
			b := run(s, r0, cJoin, maxJoinSide)
			if kind, ok := sc.markerBefore(q); ok && !keyed && b < len(s) && s[b] == s[open] && tokenLike(s[r0:b]) {
				sc.add(r0, b, kind)
			}
			continue
		}
		js = sc.join(js, runBack(s, q, cJoin, maxJoinSide), q, r0, run(s, r0, cJoin, maxJoinSide))
	}
}

// glue returns the index of the quote that opens the next string when
// s[p:] starts with glue and then one (see above), else -1, and whether a
// key lay between. It looks at most maxGlue bytes ahead, and maxKey more
// for a key.
func glue(s string, p int, across bool) (int, bool) {
	end := min(len(s), p+maxGlue)
	keyed, lines := false, 0
	for ; p < end; p++ {
		switch c := s[p]; c {
		case ' ', '\t', '\r', '+', ',', '.', '&', '|', '\\', '(', ')', ';':
		case '\n':
			if lines++; !across || lines > 2 {
				return -1, false
			}
			// A numbered listing's number is not glue, but does not
			// count against it.
			next := lineStart(s, p+1)
			end = min(len(s), end+next-(p+1))
			p = next - 1
		case '"', '\'':
			if keyed {
				return p, true
			}
			// "name": is a key, and the value's quote comes after it.
			k := strings.IndexByte(s[p+1:min(len(s), p+1+maxKey)], c)
			if k < 0 || strings.IndexByte(s[p+1:p+1+k], '\n') >= 0 {
				return p, false
			}
			r := run(s, p+1+k+1, cSpace, 8)
			if r >= len(s) || s[r] != ':' {
				return p, false
			}
			keyed, p, end = true, r, min(len(s), r+1+maxGlue)
		default:
			return -1, false
		}
	}
	return -1, false
}

// spansJoin reports whether a finding covers bytes on both sides of split.
func spansJoin(fs []finding, split int) bool {
	for _, f := range fs {
		if f.start < split && f.end > split {
			return true
		}
	}
	return false
}

// joinedRun adds to sc's findings those of the decoded view of the base64
// or hex run that spans split in the joined word sc.s (each side's own
// runs were decoded with their lines), and returns them all.
func (sc *scanner) joinedRun(split int) []finding {
	a, b := split, split
	for a > 0 && ntab[sc.s[a-1]]&nB64 != 0 {
		a--
	}
	for b < len(sc.s) && ntab[sc.s[b]]&nB64 != 0 {
		b++
	}
	if b-a < minB64Run || a == split || b == split || !sampledText(sc.s[a:b]) {
		return sc.out
	}
	sub := scanner{d: sc.d, s: sc.s[a:b]}
	sub.scanViews()
	for _, f := range sub.out {
		sc.out = append(sc.out, finding{start: f.start + a, end: f.end + a, kind: f.kind})
	}
	return sc.out
}
