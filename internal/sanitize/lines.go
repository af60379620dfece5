package sanitize

import "strings"

// LineRedactor redacts a text that a tool reads in lines and returns line
// by line, as grep does: what it matches, cuts and returns must be the
// redacted text, or repeated searches rebuild a secret from which
// patterns match, and a cut leaves a piece of a secret no detector
// recognizes. It redacts blocks of whole lines and keeps every line
// break, so line numbers stay right: a finding spanning lines (a private
// key block) leaves a marker on each of its lines, and a block still open
// at the end of one call continues into the next. Not safe for concurrent
// use; make one per file.
type LineRedactor struct {
	det     *detector
	pemOpen bool
	buf     []byte
	tmp     []byte
}

// NewLineRedactor returns a line redactor with the output policy of the
// named tool (without its category's layers, as NewStreamRedactor).
func (s *Sanitizer) NewLineRedactor(tool string) *LineRedactor {
	return &LineRedactor{det: s.policyByName(tool).output}
}

// Lines redacts text, whole lines each ending in "\n" (the last may lack
// it), keeping every line break. It returns text itself when nothing was
// found; otherwise a buffer that the next call reuses.
func (r *LineRedactor) Lines(text []byte) []byte {
	if r.det.none() || len(text) == 0 {
		return text
	}
	fs, open := r.det.find(unsafeString(text), r.pemOpen)
	r.pemOpen = open
	if len(*fs) == 0 {
		putFindings(fs)
		return text
	}
	r.buf = r.applyLines(r.buf[:0], unsafeString(text), *fs)
	putFindings(fs)
	// Further rounds to the fixpoint, as redactInto runs them.
	for range maxRounds - 1 {
		fs, _ := r.det.find(unsafeString(r.buf), false)
		if len(*fs) == 0 {
			putFindings(fs)
			break
		}
		r.tmp = r.applyLines(r.tmp[:0], unsafeString(r.buf), *fs)
		putFindings(fs)
		r.buf, r.tmp = r.tmp, r.buf
	}
	return r.buf
}

// applyLines is apply keeping line breaks: each non-empty line a finding
// touches gets its marker (a continued key block's too: every line stands
// alone in a tool's result). An empty line stays empty, wherever the
// blocks were cut: a key block continued from the last call may start
// with one.
func (r *LineRedactor) applyLines(dst []byte, s string, fs []finding) []byte {
	prev := 0
	for _, f := range fs {
		dst = append(dst, s[prev:f.start]...)
		seg := s[f.start:f.end]
		for {
			nl := strings.IndexByte(seg, '\n')
			piece := seg
			if nl >= 0 {
				piece = seg[:nl]
			}
			if piece != "" {
				dst = append(append(append(dst, markerPrefix...), r.det.kinds[f.kind].name...), ']')
			}
			if nl < 0 {
				break
			}
			dst = append(dst, '\n')
			seg = seg[nl+1:]
		}
		prev = f.end
	}
	return append(dst, s[prev:]...)
}
