package strictjson

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical returns JSON in the RFC 8785 canonical form (JCS: object keys
// sorted, no insignificant space, numbers and strings written one way), so
// key order and spacing do not change a hash; input that is not one JSON
// value comes back unchanged.
//
// jsontext's Canonicalize defines the answer. It is general, and costs
// about 1.5 µs for a 60-byte document, once per audited call: a tenth of
// what the audit log costs a call. canonicalize below writes the same bytes
// in one pass for the documents arguments nearly always are, and hands
// anything it is unsure of to jsontext: names with escapes or with
// characters from U+E000 up (whose UTF-16 order is not their UTF-8 order),
// duplicate names, lone surrogates, invalid UTF-8, numbers out of range,
// deep nesting, anything that is not JSON. FuzzCanonical holds the two
// equal.
//
// A document already in that form (isCanonical) is returned as it is:
// the result may be data itself, so it is for reading (hashing), not for
// appending to.
func Canonical(data []byte) []byte {
	if isCanonical(data) {
		return data
	}
	if out, ok := canonicalize(data); ok {
		return out
	}
	return canonicalSlow(data)
}

// canonicalSlow is jsontext's canonical form.
func canonicalSlow(data []byte) []byte {
	v := jsontext.Value(append(make([]byte, 0, len(data)), data...))
	if err := v.Canonicalize(); err != nil {
		return data
	}
	return v
}

// canonicalize is the fast path; ok false leaves the document to
// canonicalSlow.
func canonicalize(data []byte) ([]byte, bool) {
	c := canonWriters.Get().(*canonWriter)
	defer func() {
		clear(c.members[:cap(c.members)]) // no references into data kept
		c.out, c.members, c.scratch = nil, c.members[:0], c.scratch[:0]
		canonWriters.Put(c)
	}()
	c.out = make([]byte, 0, len(data))
	rest, ok := c.value(data, 0)
	if !ok || len(skipSpace(rest)) != 0 {
		return nil, false
	}
	return c.out, true
}

// canonWriters keeps the writers' scratch from one document to the next.
var canonWriters = sync.Pool{New: func() any { return new(canonWriter) }}

// skipSpace is b from its first byte that is not JSON whitespace.
func skipSpace(b []byte) []byte { return b[SkipSpace(b, 0):] }

// canonMaxDepth bounds the fast path's recursion; deeper documents go to
// jsontext.
const canonMaxDepth = 64

type canonWriter struct {
	out []byte
	// members is a stack of the open objects' members: an object's are
	// pushed as its values are written and popped once it is sorted, so
	// a nested object's have gone when its parent's next is pushed.
	members []canonMember
	scratch []byte // where sortMembers reorders an object's bytes
}

// canonMember is one member of an object being written: its name (raw,
// without escapes) and where its bytes are in out.
type canonMember struct {
	name       []byte
	start, end int
}

// value writes the canonical form of the value at the start of b and
// returns what follows it.
func (c *canonWriter) value(b []byte, depth int) ([]byte, bool) {
	b = skipSpace(b)
	if len(b) == 0 || depth > canonMaxDepth {
		return nil, false
	}
	switch b[0] {
	case '{':
		return c.object(b[1:], depth+1)
	case '[':
		return c.array(b[1:], depth+1)
	case '"':
		return c.str(b[1:])
	case 't':
		return c.literal(b, "true")
	case 'f':
		return c.literal(b, "false")
	case 'n':
		return c.literal(b, "null")
	}
	return c.number(b)
}

func (c *canonWriter) literal(b []byte, lit string) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(lit)) {
		return nil, false
	}
	c.out = append(c.out, lit...)
	return b[len(lit):], true
}

// open writes a container's opening bracket (b is after it); empty
// reports one closed at once, written whole, and rest is what follows.
func (c *canonWriter) open(b []byte, open, closing byte) (rest []byte, empty bool) {
	c.out = append(c.out, open)
	b = skipSpace(b)
	if len(b) > 0 && b[0] == closing {
		c.out = append(c.out, closing)
		return b[1:], true
	}
	return b, false
}

func (c *canonWriter) array(b []byte, depth int) ([]byte, bool) {
	b, empty := c.open(b, '[', ']')
	if empty {
		return b, true
	}
	for {
		var ok bool
		if b, ok = c.value(b, depth); !ok {
			return nil, false
		}
		b = skipSpace(b)
		if len(b) == 0 {
			return nil, false
		}
		switch b[0] {
		case ',':
			c.out = append(c.out, ',')
			b = b[1:]
		case ']':
			c.out = append(c.out, ']')
			return b[1:], true
		default:
			return nil, false
		}
	}
}

func (c *canonWriter) object(b []byte, depth int) ([]byte, bool) {
	b, empty := c.open(b, '{', '}')
	if empty {
		return b, true
	}
	first := len(c.out)
	base := len(c.members) // this object's members are c.members[base:]
	defer func() { c.members = c.members[:base] }()
	for {
		b = skipSpace(b)
		if len(b) == 0 || b[0] != '"' {
			return nil, false
		}
		name, rest, ok := plainName(b[1:])
		if !ok {
			return nil, false
		}
		start := len(c.out)
		c.out = append(c.out, '"')
		c.out = append(c.out, name...)
		c.out = append(c.out, '"', ':')
		b = skipSpace(rest)
		if len(b) == 0 || b[0] != ':' {
			return nil, false
		}
		if b, ok = c.value(b[1:], depth); !ok {
			return nil, false
		}
		c.members = append(c.members, canonMember{name: name, start: start, end: len(c.out)})
		b = skipSpace(b)
		if len(b) == 0 {
			return nil, false
		}
		if b[0] == '}' {
			b = b[1:]
			break
		}
		if b[0] != ',' {
			return nil, false
		}
		c.out = append(c.out, ',')
		b = b[1:]
	}
	if !c.sortMembers(c.members[base:], first) {
		return nil, false
	}
	c.out = append(c.out, '}')
	return b, true
}

// sortMembers puts the members written from first on in name order,
// separated by commas; false for a duplicate name (jsontext refuses it).
func (c *canonWriter) sortMembers(members []canonMember, first int) bool {
	sorted := slices.IsSortedFunc(members, func(a, b canonMember) int { return bytes.Compare(a.name, b.name) })
	if !sorted {
		slices.SortFunc(members, func(a, b canonMember) int { return bytes.Compare(a.name, b.name) })
	}
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].name, members[i].name) {
			return false
		}
	}
	if sorted {
		return true
	}
	c.scratch = c.scratch[:0]
	for i, m := range members {
		if i > 0 {
			c.scratch = append(c.scratch, ',')
		}
		c.scratch = append(c.scratch, c.out[m.start:m.end]...)
	}
	c.out = append(c.out[:first], c.scratch...)
	return true
}

// plainName reads a member name that needs no unescaping and sorts the
// same in UTF-8 as in UTF-16 (every character below U+E000), up to its
// closing quote; ok false for any other.
func plainName(b []byte) (name, rest []byte, ok bool) {
	for i := 0; i < len(b); i++ {
		switch ch := b[i]; {
		case ch == '"':
			if !utf8.Valid(b[:i]) {
				return nil, nil, false
			}
			return b[:i], b[i+1:], true
		case ch == '\\' || ch < 0x20 || ch >= 0xEE:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// str writes a string (b is after its opening quote) as JCS does: every
// character as itself but '"', '\\' and the controls, escaped as short as
// they can be (\b \t \n \f \r, else \u00xx).
func (c *canonWriter) str(b []byte) ([]byte, bool) {
	c.out = append(c.out, '"')
	plain := 0 // b[:plain] is copied as it is
	for i := 0; i < len(b); {
		ch := b[i]
		switch {
		case ch == '"':
			if !utf8.Valid(b[plain:i]) {
				return nil, false
			}
			c.out = append(c.out, b[plain:i]...)
			c.out = append(c.out, '"')
			return b[i+1:], true
		case ch < 0x20:
			return nil, false
		case ch != '\\':
			i++
			continue
		}
		if !utf8.Valid(b[plain:i]) {
			return nil, false
		}
		c.out = append(c.out, b[plain:i]...)
		if i+1 >= len(b) {
			return nil, false
		}
		r, n := rune(-1), 2
		switch b[i+1] {
		case '"', '\\', '/':
			r = rune(b[i+1])
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			if i+6 > len(b) {
				return nil, false
			}
			v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
			if err != nil || v >= 0xD800 && v <= 0xDFFF { // a surrogate: jsontext's to pair or refuse
				return nil, false
			}
			r, n = rune(v), 6
		default:
			return nil, false
		}
		c.out = appendCanonRune(c.out, r)
		i += n
		plain = i
	}
	return nil, false
}

// appendCanonRune writes an unescaped character as JCS writes it.
func appendCanonRune(dst []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// number writes a number as ECMAScript's Number.prototype.toString does
// for its float64 value (RFC 8785 section 3.2.2.3).
func (c *canonWriter) number(b []byte) ([]byte, bool) {
	n, ok := NumberEnd(b, 0)
	if !ok {
		return nil, false
	}
	text := b[:n]
	integer := true // no fraction, no exponent
	for _, ch := range text {
		integer = integer && ch != '.' && ch != 'e' && ch != 'E'
	}
	if integer && n <= 15 { // exact in a float64, written as it is
		if string(text) == "-0" {
			text = text[1:]
		}
		c.out = append(c.out, text...)
		return b[n:], true
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, false
	}
	if f == 0 {
		f = 0 // -0 is written 0
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(c.out)
	c.out = strconv.AppendFloat(c.out, f, format, -1, 64)
	if format == 'e' { // e-07 is e-7 in ECMAScript
		o := c.out[start:]
		if k := len(o); k >= 4 && o[k-4] == 'e' && o[k-3] == '-' && o[k-2] == '0' {
			o[k-2] = o[k-1]
			c.out = c.out[:len(c.out)-1]
		}
	}
	return b[n:], true
}
