package fs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// binarySniffBytes is how far a NUL byte marks a file as binary; git's
// buffer_is_binary looks at the same first 8000 bytes.
const binarySniffBytes = 8000

// errBinary reports content that is not text: a NUL byte near the start, or
// bytes that are not UTF-8, which a model cannot read and edit_file could not
// match reliably. It is a constant sentinel, never mutated.
var errBinary = errors.New("binary content")

// scanLines streams r line by line and calls fn with each 1-based line number
// and the line without its "\n" (a "\r" is kept, so edits stay byte-exact).
// A final line without a newline is still a line; an empty input has none.
// The line slice is only valid during the call. fn returns false to stop.
// scanLines returns the number of lines seen, and errBinary at the first
// sign of binary content (lines before it have been passed to fn already).
func scanLines(r io.Reader, bufSize int, fn func(n int, line []byte) bool) (int, error) {
	br := bufio.NewReaderSize(r, bufSize)
	var long []byte // a line longer than the buffer, assembled; reused
	assembling := false
	n, pos := 0, 0
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long, assembling = append(long, chunk...), true
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return n, err
		}
		line := chunk
		if assembling {
			long = append(long, chunk...)
			line, long, assembling = long, long[:0], false
		}
		if len(line) == 0 { // EOF right after a newline, or empty input
			return n, nil
		}
		if pos < binarySniffBytes && bytes.IndexByte(line[:min(len(line), binarySniffBytes-pos)], 0) >= 0 {
			return n, errBinary
		}
		pos += len(line)
		line = bytes.TrimSuffix(line, []byte{'\n'})
		if !utf8.Valid(line) {
			return n, errBinary
		}
		n++
		if !fn(n, line) || err != nil {
			return n, nil
		}
	}
}

// numberWidth is the width cat -n gives line numbers.
const numberWidth = 6

// numberedLen is the size appendNumbered adds for a line of length l.
func numberedLen(n, l int) int {
	digits := len(strconv.Itoa(n))
	return max(digits, numberWidth) + 1 + l + 1
}

// appendNumbered appends line n the way cat -n prints it ("%6d\t%s\n")
// without fmt, which matters on the read path's hot loop.
func appendNumbered(dst []byte, n int, line []byte) []byte {
	var num [20]byte
	d := strconv.AppendInt(num[:0], int64(n), 10)
	for i := len(d); i < numberWidth; i++ {
		dst = append(dst, ' ')
	}
	dst = append(dst, d...)
	dst = append(dst, '\t')
	dst = append(dst, line...)
	return append(dst, '\n')
}
