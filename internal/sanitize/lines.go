package sanitize

// LineRedactor redacts a text line by line, the way grep reads a file:
// each line on its own (with its decoded views), except that a private key
// block carries over from its header line to its footer line, so every
// line of the block is redacted. A tool that matches or cuts lines runs
// them through it first, so no pattern can match inside a secret and no
// cut can leave a piece of one that the output sanitizer would no longer
// recognize. Not safe for concurrent use; make one per file.
type LineRedactor struct {
	det     *detector
	pemOpen bool
	buf     []byte
}

// NewLineRedactor returns a line redactor with the output policy of the
// named tool (without its category's layers, as NewStreamRedactor).
func (s *Sanitizer) NewLineRedactor(tool string) *LineRedactor {
	return &LineRedactor{det: s.policyByName(tool).output}
}

// Line returns line, which holds no newline, with every finding replaced
// by its marker. It returns line itself when nothing was found; otherwise
// a buffer that the next call reuses.
func (r *LineRedactor) Line(line []byte) []byte {
	if r.det.none() || len(line) == 0 {
		return line
	}
	fs, open := r.det.find(unsafeString(line), r.pemOpen)
	r.pemOpen = open
	if len(*fs) == 0 {
		putFindings(fs)
		return line
	}
	for i := range *fs {
		(*fs)[i].cont = false // a line of a block shows its marker too
	}
	r.buf = r.det.apply(r.buf[:0], unsafeString(line), *fs, nil)
	putFindings(fs)
	// Further rounds, as redactInto runs, so a line redacts to the same
	// fixpoint as the whole text would.
	if out, found := r.det.redactInto(nil, unsafeString(r.buf), nil); found {
		r.buf = out
	}
	return r.buf
}
