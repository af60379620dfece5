package sanitize

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/toold/toold/internal/strictjson"
)

// The output cap. A result over it keeps its shape: the longest string
// values are cut to a common length (water-filling, so one huge field
// pays before many small ones), each ending in an explicit marker. Only
// when the strings cannot absorb the excess (a huge array of numbers) is
// the result replaced by an object that says so and carries the start of
// the JSON text.

// truncReserve is room per cut string for its marker and for what
// re-redacting the cut end may add.
const truncReserve = 160

type span struct{ start, end int } // a string value's content, quotes excluded

// capJSON fits the valid JSON doc into max bytes. original is the size
// reported in the fallback object.
func capJSON(doc []byte, max, original int, det *detector, counts *kindCounts) []byte {
	if len(doc) <= max {
		return doc
	}
	spans := valueStrings(doc)
	need := len(doc) - max
	saving := func(keep int) int {
		total := 0
		for _, s := range spans {
			if n := s.end - s.start; n > keep+truncReserve {
				total += n - keep - truncReserve
			}
		}
		return total
	}
	if saving(0) < need {
		return fallbackJSON(doc, max, original, det, counts)
	}
	longest := 0
	for _, s := range spans {
		longest = max2(longest, s.end-s.start)
	}
	// The largest keep that still saves enough.
	keep := sortSearch(longest, func(k int) bool { return saving(k) < need }) - 1
	out := make([]byte, 0, max)
	prev := 0
	var dec, text []byte
	for _, s := range spans {
		n := s.end - s.start
		if n <= keep+truncReserve {
			continue
		}
		content := doc[s.start:s.end]
		cut := safeCut(content, keep)
		out = append(out, doc[prev:s.start-1]...)
		var bad int
		dec = decodeJSONString(dec[:0], content[:cut], &bad)
		dec = append(dec, "[TRUNCATED: "...)
		dec = strconv.AppendInt(dec, int64(n-cut), 10)
		dec = append(dec, " bytes]"...)
		text, _ = det.redactInto(text[:0], unsafeString(dec), counts)
		if len(text) == 0 {
			text = dec
		}
		out = appendJSONString(out, unsafeString(text))
		prev = s.end + 1
	}
	out = append(out, doc[prev:]...)
	if len(out) > max {
		return fallbackJSON(doc, max, original, det, counts)
	}
	return out
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// sortSearch is sort.Search over [0, n].
func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n+1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// valueStrings lists the string values of valid JSON (keys excluded: a cut
// key would be a different member).
func valueStrings(doc []byte) []span {
	var spans []span
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			continue
		}
		t, _ := scanJSONString(doc, i)
		if j := strictjson.SkipSpace(doc, t.end); j >= len(doc) || doc[j] != ':' {
			spans = append(spans, span{i + 1, t.end - 1})
		}
		i = t.end - 1
	}
	return spans
}

// safeCut returns the largest prefix length of raw string content, at
// most keep, that splits no escape, surrogate pair or UTF-8 sequence.
func safeCut(content []byte, keep int) int {
	j := 0
	for j < len(content) {
		n := 1
		switch c := content[j]; {
		case c == '\\':
			n = escLen(content, j)
			if n == 6 && j+12 <= len(content) && content[j+6] == '\\' && content[j+7] == 'u' {
				if hi := hexVal(content[j+2 : j+6]); 0xd800 <= hi && hi < 0xdc00 {
					n = 12
				}
			}
		case c >= utf8.RuneSelf:
			_, n = utf8.DecodeRune(content[j:])
		}
		if n == 0 || j+n > keep {
			break
		}
		j += n
	}
	return j
}

// fallbackJSON replaces doc by {"truncated":true,"original_bytes":N,
// "partial_json":"<start of doc>"}, the start shortened until it fits.
func fallbackJSON(doc []byte, max, original int, det *detector, counts *kindCounts) []byte {
	head := `{"truncated":true,"original_bytes":` + strconv.Itoa(original) + `,"partial_json":`
	budget := max - len(head) - 1
	n := min(len(doc), budget)
	var text, out []byte
	for range 32 {
		p := doc[:n]
		for len(p) > 0 && !utf8.Valid(p) {
			p = p[:len(p)-1]
		}
		text, _ = det.redactInto(text[:0], unsafeString(p), nil)
		if len(text) == 0 {
			text = append(text[:0], p...)
		}
		out = appendJSONString(append(out[:0], head...), unsafeString(text))
		if len(out)+1 <= max {
			break
		}
		n = n * budget / (len(out) - len(head)) * 9 / 10
	}
	if len(out)+1 > max {
		out = append(append(out[:0], head...), `""`...)
	}
	_ = counts // the partial text was redacted before; nothing new to count
	return slices.Clip(append(out, '}'))
}
