// Package sanitize is the pipeline's input and output sanitization stage:
// what a tool sees and what a caller gets back pass through it, and the
// envelope reports what it changed.
//
// Input: every string of the arguments is checked for control characters
// (refused or stripped), capped in size, and optionally scanned for
// secrets and personal data (redact, block or off). Output, on by default
// for every tool: secrets and personal data are replaced by
// "[REDACTED:<kind>]", terminal escapes stripped from command output,
// invalid UTF-8 replaced (with a note), and the result capped with an
// explicit truncation marker while staying valid JSON. Streamed chunks go
// through a StreamRedactor per stream, which holds back an incomplete line
// (bounded) so a secret split across two writes is still found.
//
// Detection is a set of hand-written matchers behind literal anchors (see
// README.md for the rule list and the measured comparison with gitleaks):
// clean text costs a few SIMD substring searches and a byte-class walk,
// with no regexp and no allocation.
package sanitize

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/tools"
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

// Sanitizer applies the policy; safe for concurrent use.
type Sanitizer struct {
	cfg      Config
	kinds    []kindInfo
	customs  []customRule
	allow    map[string]struct{}
	window   int
	metrics  metrics
	policies sync.Map // policyKey -> *policy
}

// New validates cfg and builds a sanitizer whose metrics are registered on
// reg (nil registers nothing).
func New(cfg Config, reg prometheus.Registerer) (*Sanitizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sanitizer{cfg: cfg, window: cfg.StreamWindowBytes, allow: map[string]struct{}{}}
	if s.window == 0 {
		s.window = DefaultStreamWindowBytes
	}
	for _, v := range cfg.Allow {
		s.allow[v] = struct{}{}
	}
	s.kinds, s.customs = compilePatterns(cfg.Patterns)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// metrics are the package's counters; each Sanitizer has its own.
type metrics struct {
	redactions *prometheus.CounterVec
	blocked    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		redactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toold_redactions_total",
			Help: "Secrets and personal data redacted, by tool, direction (input, output, stream) and kind.",
		}, []string{"tool", "direction", "kind"}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toold_sanitize_blocked_total",
			Help: "Calls refused because their arguments carried a secret or personal data, by tool and kind.",
		}, []string{"tool", "kind"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.redactions, m.blocked} {
		if err := reg.Register(c); err != nil {
			return m, fmt.Errorf("sanitize: registering metrics: %w", err)
		}
	}
	return m, nil
}

// ToolRedactions is the report of what a tool masked in its result
// itself (tools.Call.CountRedactions), by kind; it counts them in the
// redaction metrics as output redactions of the tool.
func (s *Sanitizer) ToolRedactions(spec *tools.Spec, byKind map[string]int) Report {
	rep := Report{ByKind: byKind}
	for _, n := range byKind {
		rep.Redactions += n
	}
	s.metrics.record(spec.Name, "output", &rep)
	return rep
}

func (m *metrics) record(tool, direction string, r *Report) {
	for k, n := range r.ByKind {
		m.redactions.WithLabelValues(tool, direction, k).Add(float64(n))
	}
}

// policy is one tool's resolved settings and compiled detectors.
type policy struct {
	tool string
	in   InputPolicy
	out  OutputPolicy
	// strip is Output.StripANSI resolved.
	strip bool
	// input finds what the input modes redact or block; output what the
	// output modes redact; log everything enabled, whatever the modes: logs
	// never carry secrets.
	input, output, log *detector
}

// policyFor resolves (and caches) the policy of a tool.
func (s *Sanitizer) policyFor(spec *tools.Spec) *policy {
	key := policyKey{name: spec.Name, cat: spec.Category, withCat: true}
	if p, ok := s.policies.Load(key); ok {
		return p.(*policy)
	}
	p, _ := s.policies.LoadOrStore(key, s.compile(spec.Name, spec.Category, true))
	return p.(*policy)
}

// policyKey names a compiled policy: a struct rather than a string built
// from its parts, so the lookup on every call allocates nothing (Load does
// not keep its key; the string had to be concatenated first).
type policyKey struct {
	name    string
	cat     tools.Category
	withCat bool
}

// policyByName resolves a tool's policy without its category layers, for
// callers that know only the name (NewStreamRedactor, log helpers).
func (s *Sanitizer) policyByName(tool string) *policy {
	key := policyKey{name: tool}
	if p, ok := s.policies.Load(key); ok {
		return p.(*policy)
	}
	p, _ := s.policies.LoadOrStore(key, s.compile(tool, "", false))
	return p.(*policy)
}

func (s *Sanitizer) compile(name string, cat tools.Category, withCat bool) *policy {
	p := builtinPolicy
	if withCat {
		p = p.over(CategoryDefaults(cat))
	}
	p = p.over(s.cfg.Defaults)
	if c, ok := s.cfg.Categories[string(cat)]; ok && withCat {
		p = p.over(c)
	}
	if t, ok := s.cfg.Tools[name]; ok {
		p = p.over(t)
	}
	mode := func(modes [2]string) func(class) string {
		return func(c class) string { return modes[c] }
	}
	return &policy{
		tool: name, in: p.Input, out: p.Output, strip: *p.Output.StripANSI,
		input:  s.detector(p.Detectors, mode([2]string{p.Input.Secrets, p.Input.PII}), "redact", "block"),
		output: s.detector(p.Detectors, mode([2]string{p.Output.Secrets, p.Output.PII}), "redact"),
		log:    s.detector(p.Detectors, mode([2]string{"redact", "redact"}), "redact"),
	}
}

// detector builds the rule set of the kinds that are enabled and whose
// class mode is one of want.
func (s *Sanitizer) detector(toggles map[string]bool, modeOf func(class) string, want ...string) *detector {
	d := &detector{kinds: s.kinds, on: make([]bool, len(s.kinds)), allow: s.allow, customs: s.customs}
	for k, info := range s.kinds {
		enabled, set := toggles[info.name]
		if !set {
			enabled = !info.optIn
		}
		m := modeOf(info.class)
		d.on[k] = enabled && (m == want[0] || len(want) > 1 && m == want[1])
	}
	return d
}

// Output sanitizes a marshaled result: redaction, terminal escapes (per
// policy), invalid UTF-8, and the size cap. The result is always valid
// JSON; a document that is not (which json.Marshal never produces) comes
// back as one string.
func (s *Sanitizer) Output(_ context.Context, spec *tools.Spec, data json.RawMessage) (json.RawMessage, Report, error) {
	p := s.policyFor(spec)
	out, _, rep := s.sanitizeJSON(p, p.output, data, p.out.MaxBytes, false)
	s.metrics.record(spec.Name, "output", &rep)
	return out, rep, nil
}

// OutputBudget is Output for a result with a budget: the head it returns
// is cut to budget bytes (or the output cap, output.max_bytes, if that is
// smaller; budget 0 or less: the cap alone), and when anything was cut,
// whole is the result sanitized entirely and not cut at all, for the
// pipeline to keep as an artifact. Head and whole pass the same redaction:
// a secret past the head is as redacted in the whole as one inside it.
func (s *Sanitizer) OutputBudget(_ context.Context, spec *tools.Spec, data json.RawMessage, budget int) (head, whole json.RawMessage, rep Report, err error) {
	p := s.policyFor(spec)
	limit := p.out.MaxBytes
	if budget > 0 {
		limit = min(limit, budget)
	}
	head, whole, rep = s.sanitizeJSON(p, p.output, data, limit, true)
	s.metrics.record(spec.Name, "output", &rep)
	return head, whole, rep, nil
}

// sanitizeJSON redacts and repairs data, then caps it at limit; with
// keep, a result that was cut is returned whole too, before the cut.
func (s *Sanitizer) sanitizeJSON(p *policy, det *detector, data []byte, limit int, keep bool) (out, whole []byte, _ Report) {
	var rep Report
	w := outWalker{src: data, det: det, strip: p.strip}
	w.borrow()
	defer w.giveBack()
	out = data
	if w.run() {
		out = w.result()
	} else {
		text, st := cleanAll(string(data), p.strip)
		w.clean = st
		text = det.redactString(text, &w.counts)
		out = appendJSONString(nil, text)
		rep.Notes = append(rep.Notes, "the tool's output was not valid JSON; it is returned as one string")
	}
	if w.clean.bad > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("replaced %d invalid UTF-8 byte(s) with U+FFFD%s", w.clean.bad, at0(w.firstBad)))
	}
	if w.clean.stripped > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("removed %d terminal escape sequence(s) or control character(s)%s", w.clean.stripped, at0(w.firstStrip)))
	}
	if len(out) > limit {
		rep.Truncated, rep.OriginalBytes = true, len(data)
		if keep {
			whole = slices.Clip(out)
		}
		out = capJSON(out, limit, len(data), det, &w.counts)
	}
	w.counts.report(s.kinds, &rep)
	return out, whole, rep
}

func at0(ptr string) string {
	if ptr == "" {
		return ""
	}
	return " (first at " + ptr + ")"
}

// cleanAll repairs a whole text (cleanText, final).
func cleanAll(text string, strip bool) (string, cleanStats) {
	var st cleanStats
	if !needsClean(text, strip) {
		return text, st
	}
	b, _ := cleanText(make([]byte, 0, len(text)), text, strip, true, &st)
	return string(b), st
}

// Text sanitizes a caller-facing message (an error's message or
// suggestion) with the tool's output policy.
func (s *Sanitizer) Text(spec *tools.Spec, text string) (string, Report) {
	var rep Report
	if text == "" {
		return text, rep
	}
	p := s.policyFor(spec)
	text, st := cleanAll(text, p.strip)
	if st.bad > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("replaced %d invalid UTF-8 byte(s) in a message with U+FFFD", st.bad))
	}
	var counts kindCounts
	text = p.output.redactString(text, &counts)
	counts.report(s.kinds, &rep)
	s.metrics.record(spec.Name, "output", &rep)
	return text, rep
}

// RedactString redacts every enabled kind from text, whatever the tool's
// output modes say, and repairs its UTF-8: for debug logging of arguments
// and outputs, which must never carry secrets.
func (s *Sanitizer) RedactString(tool, text string) string {
	text, _ = cleanAll(text, true)
	return s.policyByName(tool).log.redactString(text, nil)
}

// RedactJSON is RedactString for a JSON document (arguments or a result),
// capped at the tool's output cap; the result is valid JSON.
func (s *Sanitizer) RedactJSON(tool string, data []byte) []byte {
	p := s.policyByName(tool)
	out, _, _ := s.sanitizeJSON(&policy{tool: tool, out: p.out, strip: true}, p.log, data, p.out.MaxBytes, false)
	return out
}

// Kinds lists every detector kind this sanitizer knows (built-ins, then
// custom patterns), with its class, for documentation and discovery.
func (s *Sanitizer) Kinds() []string {
	names := make([]string, len(s.kinds))
	for i, k := range s.kinds {
		names[i] = k.name + " (" + k.class.String() + ")"
	}
	return names
}
