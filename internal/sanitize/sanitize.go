// Package sanitize is the pipeline's input and output sanitization stage:
// what a tool sees and what a caller gets back pass through it, and the
// envelope reports what it changed.
package sanitize

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"toold/internal/tools"
)

// Report says what a sanitizer changed; it is the envelope's "sanitized".
type Report struct {
	// Redactions counts replaced secrets and personal data, in total and
	// by kind.
	Redactions int            `json:"redactions"`
	ByKind     map[string]int `json:"by_kind,omitempty"`
	// Truncated is set when output was cut at the size cap; OriginalBytes
	// is then its size before the cut.
	Truncated     bool `json:"truncated"`
	OriginalBytes int  `json:"original_bytes,omitempty"`
	// Notes describe other repairs, such as replaced invalid UTF-8.
	Notes []string `json:"notes,omitempty"`
}

// Add merges o into r.
func (r *Report) Add(o Report) {
	r.Redactions += o.Redactions
	for k, n := range o.ByKind {
		if r.ByKind == nil {
			r.ByKind = map[string]int{}
		}
		r.ByKind[k] += n
	}
	r.Truncated = r.Truncated || o.Truncated
	r.OriginalBytes = max(r.OriginalBytes, o.OriginalBytes)
	r.Notes = append(r.Notes, o.Notes...)
}

// Config is the sanitization policy.
type Config struct {
	// MaxOutputBytes caps a result's JSON size.
	MaxOutputBytes int
}

// DefaultMaxOutputBytes is the output cap when none is configured.
const DefaultMaxOutputBytes = 1 << 20

// Sanitizer applies the policy; safe for concurrent use.
type Sanitizer struct {
	cfg Config
}

// New builds a sanitizer.
func New(cfg Config) *Sanitizer {
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return &Sanitizer{cfg: cfg}
}

// Input checks every string of validated arguments: control characters
// other than tab, newline and carriage return are refused.
func (s *Sanitizer) Input(_ context.Context, _ *tools.Spec, args any) (any, Report, error) {
	err := walkStrings(args, "", func(ptr, v string) error {
		if i := strings.IndexFunc(v, isControl); i >= 0 {
			return &tools.Error{Kind: tools.ValidationError, Code: "control_character",
				Message:    fmt.Sprintf("argument %s contains the control character %U at byte %d", ptr, []rune(v[i:])[0], i),
				Fields:     []tools.FieldError{{Pointer: ptr, Message: "contains a control character"}},
				Suggestion: "remove NUL and other control characters; tab, newline and carriage return are allowed"}
		}
		return nil
	})
	return args, Report{}, err
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f
}

func walkStrings(v any, ptr string, fn func(ptr, s string) error) error {
	switch t := v.(type) {
	case string:
		return fn(ptr, t)
	case map[string]any:
		for k, e := range t {
			if err := walkStrings(e, ptr+"/"+k, fn); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := walkStrings(e, fmt.Sprintf("%s/%d", ptr, i), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Output caps a result's size. A result over the cap is replaced by an
// object saying so, with the start of the original JSON text, so the caller
// always receives valid JSON.
func (s *Sanitizer) Output(_ context.Context, _ *tools.Spec, data json.RawMessage) (json.RawMessage, Report, error) {
	if len(data) <= s.cfg.MaxOutputBytes {
		return data, Report{}, nil
	}
	keep := data[:s.cfg.MaxOutputBytes/2]
	for !utf8.Valid(keep) {
		keep = keep[:len(keep)-1]
	}
	out, err := json.Marshal(map[string]any{"truncated": true, "original_bytes": len(data), "partial_json": string(keep)})
	return out, Report{Truncated: true, OriginalBytes: len(data)}, err
}

// Text sanitizes a caller-facing message (an error's message or suggestion).
func (s *Sanitizer) Text(_ *tools.Spec, text string) (string, Report) {
	return strings.ToValidUTF8(text, "\uFFFD"), Report{}
}

// Stream wraps a streaming sink; chunks pass through the same policy.
func (s *Sanitizer) Stream(_ *tools.Spec, emit func(tools.Chunk)) (wrapped func(tools.Chunk), flush func()) {
	return func(c tools.Chunk) {
		c.Data = strings.ToValidUTF8(c.Data, "\uFFFD")
		emit(c)
	}, func() {}
}
