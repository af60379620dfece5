package sanitize

import (
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// outWalker walks a JSON document iteratively (nesting costs a stack
// entry, never a goroutine stack frame), rewrites the strings, keys and
// numbers that need it and copies everything else verbatim. A clean
// document is never copied.
type outWalker struct {
	src    []byte
	dst    []byte // nil until the first change
	copied int    // src[:copied] is in dst
	det    *detector
	strip  bool
	counts kindCounts
	clean  cleanStats
	// firstBad and firstStrip point at the first repaired value, for notes.
	firstBad, firstStrip string
	dec, cln, red        []byte // scratch
	stack                []frame
	// prev is the string value before the one being read, for a token
	// split between two values (joins.go).
	prev prevValue
}

// prevValue is where the last string value's JSON is, and the word its
// text ends with.
type prevValue struct {
	ok       bool
	at, end  int  // its token in src
	inDst    bool // rewritten: its JSON ends dst
	dstEnd   int  // len(dst) after it, when inDst
	tail     []byte
	joinText []byte // scratch: tail, a line break, the next value's head
}

// frame is an open object or array.
type frame struct {
	obj     bool
	idx     int
	key     string   // current member's key (redacted, when it was)
	keyKind nameKind // what the key says about the value
	seen    map[string]int
}

// scratch is an outWalker's reusable memory, pooled so that sanitizing a
// clean document allocates nothing however large it is.
type scratch struct {
	dec, cln, red []byte
	stack         []frame
	tail, join    []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooled keeps a one-off huge document from pinning its buffers.
const maxPooled = 4 << 20

func (w *outWalker) borrow() {
	sc := scratchPool.Get().(*scratch)
	w.dec, w.cln, w.red, w.stack = sc.dec[:0], sc.cln[:0], sc.red[:0], sc.stack[:0]
	w.prev.tail, w.prev.joinText = sc.tail[:0], sc.join[:0]
}

func (w *outWalker) giveBack() {
	if cap(w.dec) > maxPooled || cap(w.cln) > maxPooled || cap(w.red) > maxPooled || cap(w.stack) > 1<<16 {
		return
	}
	for i := range w.stack[:cap(w.stack)] {
		w.stack[:cap(w.stack)][i] = frame{} // drop references to keys and maps
	}
	scratchPool.Put(&scratch{dec: w.dec, cln: w.cln, red: w.red, stack: w.stack, tail: w.prev.tail, join: w.prev.joinText})
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// run walks the whole document; false means it is not valid JSON.
func (w *outWalker) run() bool {
	src := w.src
	i := strictjson.SkipSpace(src, 0)
	var ok bool
	for {
		if i >= len(src) {
			return false
		}
		switch c := src[i]; c {
		case '{', '[':
			w.stack = append(w.stack, frame{obj: c == '{'})
			i = strictjson.SkipSpace(src, i+1)
			if i < len(src) && src[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				w.stack = w.stack[:len(w.stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, ok = w.key(i); !ok {
					return false
				}
			}
			continue
		case '"':
			if i, ok = w.value(i); !ok {
				return false
			}
		default:
			if i, ok = w.scalar(i); !ok {
				return false
			}
		}
		for {
			i = strictjson.SkipSpace(src, i)
			if len(w.stack) == 0 {
				return i == len(src)
			}
			if i >= len(src) {
				return false
			}
			top := &w.stack[len(w.stack)-1]
			c := src[i]
			if c == ',' {
				i = strictjson.SkipSpace(src, i+1)
				if !top.obj {
					top.idx++
				} else if i, ok = w.key(i); !ok {
					return false
				}
				break
			}
			if top.obj && c == '}' || !top.obj && c == ']' {
				w.stack = w.stack[:len(w.stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// text returns the decoded, repaired text of the string token at i.
func (w *outWalker) text(i int) (t jstr, s string, changed, ok bool) {
	t, ok = scanJSONString(w.src, i)
	if !ok {
		return t, "", false, false
	}
	content := w.src[i+1 : t.end-1]
	s = unsafeString(content)
	if t.esc || t.raw {
		bad := w.clean.bad
		w.dec = decodeJSONString(w.dec[:0], content, &w.clean.bad)
		s = unsafeString(w.dec)
		if w.clean.bad > bad && w.firstBad == "" {
			w.firstBad = w.pointer()
		}
	}
	if (t.esc || t.raw || t.ctl) && needsClean(s, w.strip) {
		bad, stripped := w.clean.bad, w.clean.stripped
		w.cln, _ = cleanText(w.cln[:0], s, w.strip, true, &w.clean)
		s = unsafeString(w.cln)
		if w.clean.bad > bad && w.firstBad == "" {
			w.firstBad = w.pointer()
		}
		if w.clean.stripped > stripped && w.firstStrip == "" {
			w.firstStrip = w.pointer()
		}
		changed = true
	}
	return t, s, changed || t.raw, true
}

// key reads a member's key at i, redacts it if it holds a finding (an
// e-mail address used as a key), and returns the index after the colon.
func (w *outWalker) key(i int) (int, bool) {
	if i >= len(w.src) || w.src[i] != '"' {
		return 0, false
	}
	t, s, changed, ok := w.text(i)
	if !ok {
		return 0, false
	}
	top := &w.stack[len(w.stack)-1]
	top.key, top.keyKind = s, classifyName(s)
	if t.esc || t.raw || changed {
		top.key = strings.Clone(s) // the scratch buffers are reused
	}
	red, found := w.redact(s, nameNone)
	if found {
		top.keyKind = nameNone
		k := string(red)
		if n := top.seen[k]; n > 0 {
			top.seen[k] = n + 1
			k += "#" + strconv.Itoa(n+1)
		} else {
			if top.seen == nil {
				top.seen = map[string]int{}
			}
			top.seen[k] = 1
		}
		top.key = k
		w.replaceString(i, t.end, k)
	} else if changed {
		w.replaceString(i, t.end, s)
	}
	j := strictjson.SkipSpace(w.src, t.end)
	if j >= len(w.src) || w.src[j] != ':' {
		return 0, false
	}
	return strictjson.SkipSpace(w.src, j+1), true
}

// value handles a string value.
func (w *outWalker) value(i int) (int, bool) {
	t, s, changed, ok := w.text(i)
	if !ok {
		return 0, false
	}
	nk := nameNone
	if n := len(w.stack); n > 0 && w.stack[n-1].obj {
		nk = w.stack[n-1].keyKind
	}
	cut, k := w.joinPrev(s)
	red, found := w.redact(s[cut:], nk)
	if cut > 0 {
		if !found {
			red = []byte(s[cut:])
		}
		red, found = append([]byte(markerPrefix+w.det.kinds[k].name+"]"), red...), true
		w.counts.add(k)
	}
	out := s
	switch {
	case found:
		w.replaceString(i, t.end, unsafeString(red))
		out = unsafeString(red)
	case changed:
		w.replaceString(i, t.end, s)
	}
	w.notePrev(i, t.end, out, found || changed)
	return t.end, true
}

// notePrev keeps what joinPrev needs of the value just written.
func (w *outWalker) notePrev(at, end int, out string, rewritten bool) {
	p := &w.prev
	p.ok, p.at, p.end, p.inDst = true, at, end, rewritten
	if rewritten {
		p.dstEnd = len(w.dst)
	}
	p.tail = append(p.tail[:0], out[runBack(out, len(out), cJoin, maxJoinSide):]...)
}

// joinPrev finds a token split between the last string value and this
// one (text s): the piece at the end of the last is redacted in place,
// and the length of the piece at the start of s is returned, with its
// kind, for the caller to redact.
func (w *outWalker) joinPrev(s string) (int, kindID) {
	p := &w.prev
	head := run(s, 0, cJoin, maxJoinSide)
	if !p.ok || len(p.tail) == 0 || head == 0 || len(p.tail)+head < minJoin || w.det.none() {
		return 0, 0
	}
	p.joinText = append(append(append(p.joinText[:0], p.tail...), '\n'), s[:head]...)
	sc := scanner{d: w.det, s: unsafeString(p.joinText)}
	sc.scanJoins()
	split := len(p.tail)
	left, right, kind := split, 0, kindID(0)
	for _, f := range sc.out {
		if f.start < split {
			left, kind = min(left, f.start), f.kind
		} else {
			right, kind = max(right, f.end-split-1), f.kind
		}
	}
	if left == split || right == 0 || !w.rewritePrev(split-left, kind) {
		return 0, 0
	}
	return right, kind
}

// rewritePrev replaces the last n bytes of the last string value (a word
// of token characters, which JSON never escapes) with a marker; false
// when its JSON is no longer where it can be rewritten.
func (w *outWalker) rewritePrev(n int, k kindID) bool {
	p := &w.prev
	marker := markerPrefix + w.det.kinds[k].name + "]"
	switch {
	case p.inDst && len(w.dst) == p.dstEnd:
		w.dst = append(append(w.dst[:len(w.dst)-1-n], marker...), '"')
	case !p.inDst && w.copied <= p.at:
		if w.dst == nil {
			w.dst = make([]byte, 0, len(w.src)+len(w.src)/8+64)
		}
		w.dst = append(w.dst, w.src[w.copied:p.end-1-n]...)
		w.dst = append(append(w.dst, marker...), '"')
		w.copied = p.end
	default:
		return false
	}
	w.counts.add(k)
	return true
}

// redact runs the detector over s. A value under a sensitive key
// ("password", "client_secret", "private_key") is redacted whole.
func (w *outWalker) redact(s string, nk nameKind) ([]byte, bool) {
	if k, ok := keyRule(w.det, nk, s); ok {
		w.red = append(append(append(w.red[:0], markerPrefix...), w.det.kinds[k].name...), ']')
		w.counts.add(k)
		return w.red, true
	}
	if w.det.none() || s == "" {
		return nil, false
	}
	w.red = w.red[:0]
	var found bool
	w.red, found = w.det.redactInto(w.red, s, &w.counts)
	return w.red, found
}

// keyRule decides whether the value s of a member named as nk is redacted
// whole, and as which kind.
func keyRule(d *detector, nk nameKind, s string) (kindID, bool) {
	if nk == nameNone || s == "" || placeholder(s) {
		return 0, false
	}
	k := nameKinds[nk]
	switch {
	case nk == nameGCPPrivateKey && strings.HasPrefix(s, "-----BEGIN"):
		k = kGCPServiceAccount
	case nk == nameAuthorization:
		scheme, _, _ := strings.Cut(s, " ")
		if strings.EqualFold(scheme, "bearer") {
			k = kBearerToken
		} else if strings.EqualFold(scheme, "basic") {
			k = kBasicAuth
		}
	case nk == nameSecret && len(s) < 8:
		return 0, false
	}
	if _, allowed := d.allow[s]; allowed || !d.on[k] {
		return 0, false
	}
	return k, true
}

// scalar validates a number or literal at i; card numbers, and numbers
// under sensitive keys, become redaction strings.
func (w *outWalker) scalar(i int) (int, bool) {
	src := w.src
	for _, lit := range []string{"true", "false", "null"} {
		if len(src)-i >= len(lit) && string(src[i:i+len(lit)]) == lit {
			return i + len(lit), true
		}
	}
	e, ok := strictjson.NumberEnd(src, i)
	if !ok {
		return 0, false
	}
	num := unsafeString(src[i:e])
	k := kindID(0)
	found := false
	if n := len(w.stack); n > 0 && w.stack[n-1].obj {
		k, found = keyRule(w.det, w.stack[n-1].keyKind, num)
	}
	if !found && w.det.on[kCard] && 13 <= len(num) && len(num) <= 19 && run(num, 0, cDigit, 19) == len(num) &&
		validCard(src[i:e]) {
		k, found = kCard, true
	}
	if found {
		w.counts.add(k)
		w.replaceString(i, e, markerPrefix+w.det.kinds[k].name+"]")
	}
	return e, true
}

// replaceString puts the JSON encoding of s in place of src[a:b].
func (w *outWalker) replaceString(a, b int, s string) {
	if w.dst == nil {
		w.dst = make([]byte, 0, len(w.src)+len(w.src)/8+64)
	}
	w.dst = append(w.dst, w.src[w.copied:a]...)
	w.dst = appendJSONString(w.dst, s)
	w.copied = b
}

// result returns the rewritten document, or src when nothing changed.
func (w *outWalker) result() []byte {
	if w.dst == nil {
		return w.src
	}
	return append(w.dst, w.src[w.copied:]...)
}

// pointer is the JSON pointer of the value being read.
func (w *outWalker) pointer() string {
	var b strings.Builder
	for _, f := range w.stack {
		b.WriteByte('/')
		if f.obj {
			b.WriteString(tools.PointerToken(f.key))
		} else {
			b.WriteString(strconv.Itoa(f.idx))
		}
	}
	return b.String()
}
