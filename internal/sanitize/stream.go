package sanitize

import (
	"bytes"
	"io"
	"sync"

	"github.com/toold/toold/internal/tools"
)

// StreamRedactor is an io.Writer that sanitizes a byte stream (a command's
// stdout) on its way to another writer: UTF-8 repair, terminal escapes per
// policy, and redaction.
//
// It holds back what is not yet safe to judge: an incomplete UTF-8 or
// escape sequence, and the current incomplete line. No detector except
// private key blocks matches across a newline, so every complete line is
// final; a key block spanning lines is tracked as state. A line longer
// than the window is cut outside any finding, with the cut's left context
// kept, so memory stays bounded by about two windows. Written in pieces or
// at once, a stream redacts the same (the fuzz tests hold it to that for
// lines shorter than the window). Not safe for concurrent use; Stream
// serializes its redactors.
type StreamRedactor struct {
	w      io.Writer
	p      *policy
	det    *detector
	window int

	raw     []byte // written, not yet cleaned (an incomplete sequence)
	pending []byte // cleaned, not yet redacted (the incomplete line)
	ctx     []byte // the end of what was emitted, when a long line was cut
	pemOpen bool

	clean  cleanStats
	counts kindCounts
	buf    []byte
	err    error
}

// ctxLen is the left context kept across a cut: more than any matcher
// looks back (names of assignments, e-mail local parts, URL schemes).
const ctxLen = 256

// NewStreamRedactor returns a redactor writing to w with the output policy
// of the named tool (its category's layers do not apply: Stream, which the
// pipeline uses, knows the category).
func (s *Sanitizer) NewStreamRedactor(w io.Writer, tool string) *StreamRedactor {
	return s.newStreamRedactor(w, s.policyByName(tool))
}

func (s *Sanitizer) newStreamRedactor(w io.Writer, p *policy) *StreamRedactor {
	return &StreamRedactor{w: w, p: p, det: p.output, window: s.window}
}

// Write takes p in pieces of at most a window, so one huge write cannot
// grow the buffers beyond that.
func (r *StreamRedactor) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && r.err == nil {
		k := min(len(p), r.window)
		r.raw = append(r.raw, p[:k]...)
		p = p[k:]
		r.cleanRaw(false)
		r.drain(false)
	}
	return n, r.err
}

// Flush emits everything held back, as if the stream ended, and resets
// the redactor for reuse.
func (r *StreamRedactor) Flush() error {
	r.cleanRaw(true)
	r.drain(true)
	r.ctx, r.pemOpen = r.ctx[:0], false
	return r.err
}

// Close flushes.
func (r *StreamRedactor) Close() error { return r.Flush() }

// Report returns what the redactor changed so far.
func (r *StreamRedactor) Report() Report {
	var rep Report
	r.counts.report(r.det.kinds, &rep)
	if r.clean.bad > 0 {
		rep.Notes = append(rep.Notes, "replaced invalid UTF-8 in streamed output with U+FFFD")
	}
	return rep
}

func (r *StreamRedactor) cleanRaw(final bool) {
	out, n := cleanText(r.pending, unsafeString(r.raw), r.p.strip, final, &r.clean)
	r.pending = out
	r.raw = r.raw[:copy(r.raw, r.raw[n:])]
}

// drain emits complete lines, cuts an over-long line, and with final
// emits the rest.
func (r *StreamRedactor) drain(final bool) {
	for r.err == nil && len(r.pending) > 0 {
		switch nl := bytes.LastIndexByte(r.pending, '\n'); {
		case nl >= 0:
			r.emit(nl + 1)
			r.ctx = r.ctx[:0] // the next line needs no left context

		case len(r.pending) > r.window:
			r.cut()
		case final:
			r.emit(len(r.pending))
		default:
			return
		}
	}
}

// cut emits the front of an over-long line: up to a point that leaves half
// a window of lookahead and splits no finding.
func (r *StreamRedactor) cut() {
	text, off := r.withContext(r.pending)
	e := len(text) - r.window/2
	fs, _ := r.det.find(unsafeString(text), r.pemOpen)
	for _, f := range *fs {
		if f.start < e && e < f.end {
			e = f.start
			if e <= off {
				e = f.end // a finding longer than the lookahead: emit it whole
			}
			break
		}
	}
	putFindings(fs)
	r.emit(e - off)
}

// withContext returns ctx+seg in the scratch buffer and where seg starts.
// Inside a private key block the segment continues the block from its
// first byte, so no context is used.
func (r *StreamRedactor) withContext(seg []byte) ([]byte, int) {
	ctx := r.ctx
	if r.pemOpen {
		ctx = nil
	}
	r.buf = append(append(r.buf[:0], ctx...), seg...)
	return r.buf, len(ctx)
}

// emit redacts and writes pending[:n], then drops it from pending.
func (r *StreamRedactor) emit(n int) {
	seg := r.pending[:n]
	text, off := r.withContext(seg)
	fs, open := r.det.find(unsafeString(text), r.pemOpen)
	var out []byte
	prev := off
	for _, f := range *fs {
		if f.end <= off {
			continue // in the context, emitted before
		}
		f.start = max(f.start, off) // cannot happen (cuts avoid findings), but never leak
		out = append(out, text[prev:f.start]...)
		if !f.cont {
			out = append(append(append(out, markerPrefix...), r.det.kinds[f.kind].name...), ']')
			r.counts.add(f.kind)
		}
		prev = f.end
	}
	found := len(*fs) > 0
	putFindings(fs) // the slice belongs to the pool from here on
	r.pemOpen = open
	out = append(out, text[prev:]...)
	if found {
		out = r.settle(out)
	}
	r.keepContext(seg)
	r.pending = r.pending[:copy(r.pending, r.pending[n:])]
	if len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			r.err = err
		}
	}
}

// settle runs further rounds on a redacted segment, as redactInto does for
// a whole text, so a stream redacts to the same fixpoint.
func (r *StreamRedactor) settle(out []byte) []byte {
	for range maxRounds - 1 {
		fs, _ := r.det.find(unsafeString(out), false)
		if len(*fs) == 0 {
			putFindings(fs)
			break
		}
		next := r.det.apply(nil, unsafeString(out), *fs, &r.counts)
		putFindings(fs)
		out = next
	}
	return out
}

func (r *StreamRedactor) keepContext(seg []byte) {
	r.ctx = append(r.ctx, seg...)
	if len(r.ctx) > ctxLen {
		r.ctx = r.ctx[:copy(r.ctx, r.ctx[len(r.ctx)-ctxLen:])]
	}
}

// Stream wraps the pipeline's chunk sink: one StreamRedactor per stream
// name (stdout, stderr), so a secret split across two chunks of the same
// stream is still redacted. wrapped is safe for concurrent use (a command
// tool may pump stdout and stderr from two goroutines); flush emits what
// is held back.
func (s *Sanitizer) Stream(spec *tools.Spec, emit func(tools.Chunk)) (wrapped func(tools.Chunk), flush func()) {
	p := s.policyFor(spec)
	var mu sync.Mutex
	redactors := map[string]*StreamRedactor{}
	var order []string
	const maxStreams = 16 // a tool inventing stream names cannot grow this
	wrapped = func(c tools.Chunk) {
		mu.Lock()
		defer mu.Unlock()
		r, ok := redactors[c.Stream]
		if !ok && len(order) == maxStreams {
			// Past the bound each chunk is redacted alone.
			var counts kindCounts
			text, _ := cleanAll(c.Data, p.strip)
			c.Data = p.output.redactString(text, &counts)
			var rep Report
			counts.report(s.kinds, &rep)
			s.metrics.record(spec.Name, "stream", &rep)
			emit(c)
			return
		}
		if !ok {
			r = s.newStreamRedactor(chunkWriter{name: c.Stream, emit: emit}, p)
			redactors[c.Stream] = r
			order = append(order, c.Stream)
		}
		_, _ = r.Write([]byte(c.Data))
	}
	flush = func() {
		mu.Lock()
		defer mu.Unlock()
		var rep Report
		for _, name := range order {
			r := redactors[name]
			_ = r.Flush()
			rep.Add(r.Report())
			r.counts = kindCounts{}
		}
		s.metrics.record(spec.Name, "stream", &rep)
	}
	return wrapped, flush
}

// chunkWriter turns redacted bytes back into chunks of one stream.
type chunkWriter struct {
	name string
	emit func(tools.Chunk)
}

func (w chunkWriter) Write(p []byte) (int, error) {
	w.emit(tools.Chunk{Stream: w.name, Data: string(p)})
	return len(p), nil
}
