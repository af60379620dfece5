package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// refusedByReference says whether Decode(data, maxDepth) must refuse data,
// decided with encoding/json alone and obviously: not exactly one valid
// JSON value, bytes that are not valid UTF-8, nesting deeper than
// maxDepth, a name twice in one object (names compared unescaped), or an
// escaped surrogate that is not half of a pair (encoding/json reads it as
// U+FFFD; strictjson refuses text that is not Unicode).
func refusedByReference(data []byte, maxDepth int) bool {
	if !json.Valid(data) || !utf8.Valid(data) || loneSurrogate(data) {
		return true
	}
	type frame struct {
		object, wantName bool
		names            map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return true
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.object {
				top.wantName = true
			}
			stack = append(stack, &frame{object: tok == json.Delim('{'), wantName: true, names: map[string]bool{}})
			if len(stack) > maxDepth {
				return true
			}
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if top.wantName {
			name := tok.(string)
			if top.names[name] {
				return true
			}
			top.names[name], top.wantName = true, false
			continue
		}
		top.wantName = true
	}
}

// loneSurrogate reports whether valid JSON escapes a UTF-16 surrogate
// that is not followed (high) or preceded (low) by its other half.
// Backslashes occur only inside strings in valid JSON, so the whole text
// can be scanned.
func loneSurrogate(data []byte) bool {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if data[i] != 'u' {
			continue
		}
		r := hex4(data[i+1:])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(data) || data[i+1] != '\\' || data[i+2] != 'u' {
				return true
			}
			if lo := hex4(data[i+3:]); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

func hex4(b []byte) uint64 {
	n, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return n
}
