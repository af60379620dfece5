package fs

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/toold/toold/internal/tools"
)

// The file tools that show file contents (grep, read_file) mask secrets
// line by line before they match, window or cut anything, and edit_file
// never matches a secret (see secretSpans): otherwise a pattern or an
// old_string probing a secret one character at a time learns it, and a
// cut leaves a piece of a secret no detector recognizes (issue 16,
// finding 7). Options.Redactor provides the masking.

// redactedMarker begins what the line redactor leaves where it masked
// something ("[REDACTED:github_token]").
const redactedMarker = "[REDACTED:"

// markerRE finds the markers, with their kind.
var markerRE = regexp.MustCompile(regexp.QuoteMeta(redactedMarker) + `([a-z0-9_]+)\]`)

// redactBlock is how many bytes of lines are redacted at once: one call
// per line would cost the redactor's setup on every line.
const redactBlock = 32 << 10

// redactedLines is a scanLines callback that hands each line to keep after
// the line redactor has masked it (as it is, without a redactor). Lines
// are collected into blocks of whole lines for the redactor, which keeps
// the state of a key block across them; flush hands over the last block.
// keep returning false stops the scan.
type redactedLines struct {
	red   LineRedactor // nil: lines pass as they are
	keep  func(n int, line []byte) bool
	sink  func(block, red []byte) // when set, sees each block and its masked form first
	block []byte                  // lines waiting for the redactor
	first int                     // the number of the first of them
}

func (r *redactedLines) add(n int, line []byte) bool {
	if r.red == nil {
		return r.keep(n, line)
	}
	if len(r.block) == 0 {
		r.first = n
	}
	r.block = append(append(r.block, line...), '\n')
	if len(r.block) < redactBlock {
		return true
	}
	return r.flush()
}

// flush redacts the collected lines and hands them to keep.
func (r *redactedLines) flush() bool {
	if len(r.block) == 0 {
		return true
	}
	text, n := r.red.Lines(r.block), r.first
	if r.sink != nil {
		r.sink(r.block, text)
	}
	r.block = r.block[:0]
	for len(text) > 0 {
		nl := bytes.IndexByte(text, '\n')
		if nl < 0 {
			nl = len(text) // a redactor that lost the last break: still a line
		}
		if !r.keep(n, text[:nl]) {
			return false
		}
		text, n = text[min(nl+1, len(text)):], n+1
	}
	return true
}

// countMarkers tells the pipeline what the line redactor masked in the
// text a file tool returns (grep's lines, read_file's content), by kind:
// the output sanitizer sees only markers there, and the envelope's
// sanitized report must still count them.
func countMarkers(call *tools.Call, texts ...string) {
	for _, t := range texts {
		if !strings.Contains(t, redactedMarker) {
			continue
		}
		for _, m := range markerRE.FindAllStringSubmatch(t, -1) {
			call.CountRedactions(m[1], 1)
		}
	}
}
