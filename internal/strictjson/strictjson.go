// Package strictjson decodes untrusted JSON strictly: exactly one value,
// valid UTF-8, no duplicate object keys, bounded nesting. encoding/json
// accepts all of those silently (it keeps the last duplicate and replaces
// invalid UTF-8), which lets a caller smuggle a second value of a key past a
// validator that saw the first. The tokenizer is go-json-experiment's
// jsontext, the reference implementation of encoding/json/v2, which rejects
// duplicates and invalid UTF-8 by default; when encoding/json/v2 leaves
// GOEXPERIMENT this package switches to the standard library import.
//
// It also writes JSON where toold's hot path does it by hand: AppendString,
// and Canonical, the RFC 8785 form that audit hashes and idempotency
// fingerprints are taken of.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultMaxDepth bounds nesting when a caller does not choose a bound.
const DefaultMaxDepth = 64

// Error describes why input was refused, with where it happened.
type Error struct {
	// Offset is the byte offset at or after which the problem is.
	Offset int64
	// Pointer is the JSON pointer of the value being read, if known.
	Pointer string
	// Reason is a sentence a caller can act on.
	Reason string
}

func (e *Error) Error() string {
	where := fmt.Sprintf("at byte %d", e.Offset)
	if e.Pointer != "" {
		where += " (" + e.Pointer + ")"
	}
	return e.Reason + " " + where
}

// Decode parses data as exactly one JSON value and returns it as the generic
// tree the schema validator consumes: map[string]any, []any, string,
// json.Number, bool or nil.
func Decode(data []byte, maxDepth int) (any, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{Reason: "no JSON value: the body is empty"}
	}
	if !utf8.Valid(data) {
		return nil, &Error{Offset: int64(invalidUTF8At(data)), Reason: "the body is not valid UTF-8"}
	}
	p := decoders.Get().(*pooled)
	defer p.release()
	// A *bytes.Buffer is read in place: jsontext copies any other reader.
	p.buf = *bytes.NewBuffer(data)
	p.dec.Reset(&p.buf)
	d := decoder{dec: &p.dec, max: maxDepth}
	v, err := d.value()
	if err != nil {
		return nil, d.explain(err)
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return nil, &Error{Offset: d.dec.InputOffset(), Reason: "more than one JSON value: remove what follows the first value"}
	}
	return v, nil
}

// pooled is a tokenizer kept between calls: a new one allocates its state
// (the names it has seen, for duplicates) afresh for every body.
type pooled struct {
	dec jsontext.Decoder
	buf bytes.Buffer
}

var decoders = sync.Pool{New: func() any { return new(pooled) }}

// release lets go of the input (the values decoded are copies) and
// returns p to the pool.
func (p *pooled) release() {
	p.buf = bytes.Buffer{}
	p.dec.Reset(&p.buf)
	decoders.Put(p)
}

// DecodeInto decodes data into v: checked first as Decode checks it (one
// value, valid UTF-8, no duplicate keys, nesting within maxDepth), then
// decoded refusing fields v does not have. An input that is not acceptable
// JSON fails with an *Error; one that does not fit v with encoding/json's
// error.
func DecodeInto(data []byte, maxDepth int, v any) error {
	if _, err := Decode(data, maxDepth); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

type decoder struct {
	dec *jsontext.Decoder
	max int
}

// errTooDeep marks the nesting bound; explain turns it into an *Error.
var errTooDeep = errors.New("too deep")

func (d *decoder) value() (any, error) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{', '[':
		if d.dec.StackDepth() > d.max {
			return nil, errTooDeep
		}
		if tok.Kind() == '{' {
			return d.object()
		}
		return d.array()
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok.Kind())
}

func (d *decoder) object() (any, error) {
	m := map[string]any{}
	for d.dec.PeekKind() != '}' {
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // the token is void after the next read
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	_, err := d.dec.ReadToken()
	return m, err
}

func (d *decoder) array() (any, error) {
	a := []any{}
	for d.dec.PeekKind() != ']' {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	_, err := d.dec.ReadToken()
	return a, err
}

func (d *decoder) explain(err error) *Error {
	e := &Error{Offset: d.dec.InputOffset()}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		e.Offset, e.Pointer = se.ByteOffset, string(se.JSONPointer)
	}
	switch {
	case errors.Is(err, errTooDeep):
		e.Reason = fmt.Sprintf("nesting deeper than %d levels", d.max)
	case errors.Is(err, jsontext.ErrDuplicateName):
		e.Reason = "duplicate object key: each key may appear once"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		e.Reason = "truncated JSON: the value is not complete"
	case se != nil:
		e.Reason = "invalid JSON: " + se.Err.Error()
	default:
		e.Reason = "invalid JSON: " + err.Error()
	}
	return e
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}
