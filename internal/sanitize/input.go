package sanitize

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toold/toold/internal/tools"
)

// Input sanitizes validated arguments in place, string by string: size
// caps, control characters (refuse or strip), then secrets and personal
// data per the tool's input modes. It walks with an explicit stack, so a
// deeply nested document costs heap, not recursion. Object keys get the
// control character and size checks but no redaction: they are the
// schema's property names.
func (s *Sanitizer) Input(_ context.Context, spec *tools.Spec, args any) (any, Report, error) {
	p := s.policyFor(spec)
	bufs := walkPool.Get().(*walkBufs)
	w := inWalker{p: p, stack: bufs.frames[:0], keyBuf: bufs.keys[:0]}
	out, err := w.walk(args)
	bufs.put(w.stack, w.keyBuf)
	var rep Report
	if w.stripped > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("stripped %d control character(s) or invalid UTF-8 byte(s) from the arguments (first at %s)", w.stripped, w.firstStrip))
	}
	if err == nil && len(w.blocked) > 0 {
		for _, b := range w.blocked {
			s.metrics.blocked.WithLabelValues(spec.Name, s.kinds[b.kind].name).Inc()
		}
		err = s.blockError(w.blocked)
	}
	if err != nil {
		return nil, rep, err
	}
	w.counts.report(s.kinds, &rep)
	s.metrics.record(spec.Name, "input", &rep)
	return out, rep, nil
}

// walkBufs are an input walk's stack and the keys it sorts, reused: a
// typical call's arguments then cost the walk no allocation.
type walkBufs struct {
	frames []inFrame
	keys   []string
}

var walkPool = sync.Pool{New: func() any { return new(walkBufs) }}

// put keeps the (possibly grown) buffers for the next walk, holding no
// reference to this call's arguments; very large ones are dropped.
func (b *walkBufs) put(frames []inFrame, keys []string) {
	if cap(frames) > 1024 || cap(keys) > 4096 {
		return
	}
	clear(frames[:cap(frames)])
	clear(keys[:cap(keys)])
	b.frames, b.keys = frames[:0], keys[:0]
	walkPool.Put(b)
}

type inFrame struct {
	m        map[string]any
	keys     []string // in the walker's keyBuf, from keyStart
	keyStart int
	a        []any
	pos      int
}

func (f *inFrame) len() int {
	if f.m != nil {
		return len(f.keys)
	}
	return len(f.a)
}

type blocked struct {
	kind kindID
	ptr  string
}

type inWalker struct {
	p          *policy
	stack      []inFrame
	keyBuf     []string // the frames' sorted keys, a stack as the frames are
	total      int
	stripped   int
	firstStrip string
	counts     kindCounts
	blocked    []blocked
}

func (w *inWalker) walk(root any) (any, error) {
	switch root.(type) {
	case map[string]any, []any:
	case string:
		return w.str(root.(string), nameNone, "")
	default:
		return root, nil
	}
	if err := w.push(root); err != nil {
		return nil, err
	}
	for len(w.stack) > 0 {
		f := &w.stack[len(w.stack)-1]
		if f.pos >= f.len() {
			w.keyBuf = w.keyBuf[:f.keyStart]
			w.stack = w.stack[:len(w.stack)-1]
			if n := len(w.stack); n > 0 {
				w.stack[n-1].pos++
			}
			continue
		}
		var v any
		nk := nameNone
		if f.m != nil {
			v, nk = f.m[f.keys[f.pos]], classifyName(f.keys[f.pos])
		} else {
			v = f.a[f.pos]
		}
		switch t := v.(type) {
		case map[string]any, []any:
			if err := w.push(t); err != nil {
				return nil, err
			}
			continue
		case string:
			nv, err := w.str(t, nk, "")
			if err != nil {
				return nil, err
			}
			if nv != t {
				if f.m != nil {
					f.m[f.keys[f.pos]] = nv
				} else {
					f.a[f.pos] = nv
				}
			}
		}
		f.pos++
	}
	return root, nil
}

// push opens a container, checking (and when stripping, renaming) its keys.
func (w *inWalker) push(v any) error {
	a, _ := v.([]any)
	m, _ := v.(map[string]any)
	f := inFrame{a: a, m: m, keyStart: len(w.keyBuf)}
	if m != nil {
		for k := range m {
			w.keyBuf = append(w.keyBuf, k)
		}
		// Its own capacity ends with its keys: a child's append never
		// writes over them (when keyBuf grows, the frame keeps the old
		// array, which it alone still reads).
		f.keys = w.keyBuf[f.keyStart:len(w.keyBuf):len(w.keyBuf)]
		slices.Sort(f.keys) // problems are reported in a stable order
	}
	w.stack = append(w.stack, f)
	top := &w.stack[len(w.stack)-1]
	for i, k := range top.keys {
		top.pos = i
		nk, err := w.str(k, nameNone, "key")
		if err != nil {
			return err
		}
		if nk != k {
			if _, taken := m[nk]; taken {
				return w.fieldError(tools.CodeKeyCollision, "the key %s collides with another key once its control characters are stripped", "rename the key", strconv.Quote(nk))
			}
			m[nk] = m[k]
			delete(m, k)
			top.keys[i] = nk
		}
	}
	top.pos = 0
	return nil
}

// pointer is the JSON pointer of the current value.
func (w *inWalker) pointer() string {
	var b strings.Builder
	for i := range w.stack {
		f := &w.stack[i]
		b.WriteByte('/')
		if f.m != nil {
			b.WriteString(tools.PointerToken(f.keys[f.pos]))
		} else {
			b.WriteString(strconv.Itoa(f.pos))
		}
	}
	return b.String()
}

func (w *inWalker) fieldError(code tools.Code, format, suggestion string, args ...any) *tools.Error {
	ptr := w.pointer()
	where := ptr
	if where == "" {
		where = "(the arguments)"
	}
	msg := fmt.Sprintf(format, args...)
	return &tools.Error{Kind: tools.ValidationError, Code: code,
		Message:    "argument " + where + ": " + msg,
		Fields:     []tools.FieldError{{Pointer: ptr, Message: msg}},
		Suggestion: suggestion}
}

// str checks one string (what is "key" for object keys).
func (w *inWalker) str(v string, nk nameKind, what string) (string, error) {
	in := w.p.in
	if len(v) > in.MaxStringBytes {
		return "", w.fieldError(tools.CodeTooLong, "is %d bytes; this tool accepts at most %d bytes per string", "shorten the value, or split the work into several calls", len(v), in.MaxStringBytes)
	}
	if w.total += len(v); w.total > in.MaxTotalBytes {
		return "", &tools.Error{Kind: tools.ValidationError, Code: tools.CodeTooLarge,
			Message:    fmt.Sprintf("the arguments' strings add up to more than %d bytes, this tool's limit", in.MaxTotalBytes),
			Fields:     []tools.FieldError{{Pointer: "", Message: "too large"}},
			Suggestion: "send less text per call"}
	}
	if i, r := firstControl(v); i >= 0 {
		if nul := strings.IndexByte(v, 0); nul >= 0 && in.ControlChars != "strip" {
			// NUL is how a path, a file name or an argv element gets cut
			// short behind a check: a security refusal, not a typo.
			e := w.fieldError(tools.CodeNulByte, "contains a NUL byte at byte %d", "remove the NUL byte; no tool argument may contain one", nul)
			e.Kind = tools.SecurityError
			return "", e
		}
		if in.ControlChars != "strip" {
			desc := fmt.Sprintf("the control character %U", r)
			if r == utf8.RuneError {
				desc = "invalid UTF-8"
			}
			return "", w.fieldError(tools.CodeControlCharacter, "contains %s at byte %d", "remove NUL and other control characters; tab, newline and carriage return are allowed", desc, i)
		}
		var n int
		v, n = stripControls(v)
		if w.stripped += n; w.firstStrip == "" {
			w.firstStrip = w.pointer()
		}
	}
	if what == "key" || w.p.input.none() {
		return v, nil
	}
	return w.detect(v, nk), nil
}

// detect applies the input modes: block findings are collected (the call
// is refused after the walk, naming every one), redact ones replaced.
func (w *inWalker) detect(v string, nk nameKind) string {
	d := w.p.input
	if k, ok := keyRule(d, nk, v); ok {
		if w.mode(k) == "block" {
			if len(w.blocked) < 20 { // enough to act on; the message stays short
				w.blocked = append(w.blocked, blocked{k, w.pointer()})
			}
			return v
		}
		w.counts.add(k)
		return markerPrefix + d.kinds[k].name + "]"
	}
	fs := d.findText(v)
	defer putFindings(fs)
	block := false
	for _, f := range *fs {
		if w.mode(f.kind) == "block" && len(w.blocked) < 20 {
			w.blocked = append(w.blocked, blocked{f.kind, w.pointer()})
			block = true
		}
	}
	if len(*fs) == 0 || block {
		return v
	}
	return d.redactString(v, &w.counts)
}

func (w *inWalker) mode(k kindID) string {
	if w.p.input.kinds[k].class == classPII {
		return w.p.in.PII
	}
	return w.p.in.Secrets
}

// isControl reports the characters the input policy refuses or strips.
func isControl(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || 0x7f <= r && r <= 0x9f
}

// firstControl returns the byte index and rune of the first control
// character or invalid byte (utf8.RuneError), or -1.
func firstControl(s string) (int, rune) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if isControl(rune(c)) {
				return i, rune(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || isControl(r) {
			return i, r
		}
		i += size
	}
	return -1, 0
}

func stripControls(s string) (string, int) {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || isControl(r) {
			n++
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String(), n
}

// blockError names the kinds and where they are, never the values.
func (s *Sanitizer) blockError(bs []blocked) *tools.Error {
	code, what := tools.CodePIIBlocked, "personal data"
	var parts []string
	fields := make([]tools.FieldError, 0, len(bs))
	for _, b := range bs {
		k := s.kinds[b.kind]
		if k.class == classSecret {
			code, what = tools.CodeSecretBlocked, "secrets"
		}
		where := b.ptr
		if where == "" {
			where = "(the arguments)"
		}
		parts = append(parts, k.name+" at "+where)
		fields = append(fields, tools.FieldError{Pointer: b.ptr, Message: "carries a " + k.name})
	}
	return &tools.Error{Kind: tools.SecurityError, Code: code,
		Message:    fmt.Sprintf("the arguments carry %s (%s), which this tool refuses", what, strings.Join(parts, ", ")),
		Fields:     fields,
		Suggestion: "remove the value from the arguments; credentials belong in toold's configuration, not in a tool call"}
}
