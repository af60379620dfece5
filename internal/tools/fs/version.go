package fs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// A file's sha256, as read_file, write_file and edit_file give it and
// expected_sha256 checks it, is the SHA-256 of the file as toold shows it:
// for a file without secrets (the rule) that is the SHA-256 of its bytes,
// what sha256sum prints; for a file in which the line redactor masks
// something, the SHA-256 of the masked text, what read_file's content
// holds without its line numbers. A hash of the raw bytes of such a file
// would be an offline oracle: a caller who sees all of the file but a
// short or guessable secret (a PIN, a dictionary password) could try
// candidates against it without another call (issue 16's class: nothing
// toold returns is derived from bytes it masks). The price: an edit made
// by someone else that changes only a masked secret goes unnoticed by the
// check, and the masking's configuration is part of the value, so a
// change of sanitizer policy makes callers read again.

// versioner computes a file's sha256 from its bytes, streamed through
// raw (as an io.Writer, by a TeeReader) and its lines through lines.
type versioner struct {
	raw     hash.Hash
	last    byte // the last raw byte written
	masked  hash.Hash
	pending bool // a line break held back from masked (see sink)
	changed bool // the redactor masked something
	lines   redactedLines
}

// newVersioner returns a versioner whose lines hand each masked line to
// keep (nil: to nothing) after hashing it.
func (w *Workspace) newVersioner(keep func(n int, line []byte) bool) *versioner {
	v := &versioner{raw: sha256.New()}
	if keep == nil {
		keep = func(int, []byte) bool { return true }
	}
	v.lines = redactedLines{keep: keep}
	if w.opts.Redactor != nil {
		v.masked = sha256.New()
		v.lines.red = w.opts.Redactor()
		v.lines.sink = v.sink
	}
	return v
}

func (v *versioner) Write(p []byte) (int, error) {
	if len(p) > 0 {
		v.last = p[len(p)-1]
	}
	return v.raw.Write(p)
}

// sink takes a block of whole lines and its masked form. The block's
// lines all end in a line break, the file's last one too, so the last
// break of each block is held back until it is known whether the file
// ends there without one.
func (v *versioner) sink(block, red []byte) {
	if !bytes.Equal(block, red) {
		v.changed = true
	}
	if v.pending {
		v.masked.Write([]byte{'\n'})
	}
	red, v.pending = bytes.CutSuffix(red, []byte{'\n'})
	v.masked.Write(red)
}

// sum is the file's sha256 once all of it went through Write and lines
// (the lines flushed).
func (v *versioner) sum() string {
	if !v.changed {
		return hex.EncodeToString(v.raw.Sum(nil))
	}
	if v.pending && v.last == '\n' {
		v.masked.Write([]byte{'\n'})
	}
	return hex.EncodeToString(v.masked.Sum(nil))
}

// version computes the sha256 of the content r holds, about size bytes
// (the caller bounds r). Binary content has no masked form: its sha256 is
// of its bytes.
func (w *Workspace) version(r io.Reader, size int64) (string, error) {
	v := w.newVersioner(nil)
	tee := io.TeeReader(r, v)
	_, err := scanLines(tee, bufSize(size), v.lines.add)
	switch {
	case errors.Is(err, errBinary):
		v.changed = false
		if _, err := io.Copy(io.Discard, tee); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	default:
		v.lines.flush()
	}
	return v.sum(), nil
}

// versionOf is version of content in memory.
func (w *Workspace) versionOf(data []byte) string {
	s, _ := w.version(bytes.NewReader(data), int64(len(data))) // a bytes.Reader does not fail
	return s
}
