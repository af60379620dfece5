package sanitize

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
		r0 := run(s, nl+1, cSpace, 64) // the next line's indentation
		if le == 0 || !is(s[le-1], cJoin) || r0 >= len(s) || !is(s[r0], cJoin) {
			continue
		}
		a, b := runBack(s, le, cJoin, maxJoinSide), run(s, r0, cJoin, maxJoinSide)
		if le-a+b-r0 < minJoin {
			continue
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
			continue
		}
		m.reset()
		for k := a; k < le; k++ {
			m.put(s[k], k, k+1)
		}
		for k := r0; k < b; k++ {
			m.put(s[k], k, k+1)
		}
		sc.addFound(m, sc.d.merge(unsafeString(m.b), js.fs), le-a)
	}
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
