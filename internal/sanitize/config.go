package sanitize

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toold/toold/internal/tools"
)

// Config is the sanitization policy, embedded in toold's YAML config as
// "sanitize:". The zero Config is the documented safe default: control
// characters refused in arguments, every built-in detector except
// ip_address on, secrets and personal data redacted from every tool's
// output, outputs capped at 1 MiB, terminal escapes stripped from command
// output. Empty strings, zeros and nil pointers mean "inherit".
//
// A tool's policy is resolved in layers, later ones winning field by
// field: built-in defaults, built-in category defaults (see
// CategoryDefaults), Defaults, Categories[category], Tools[name].
type Config struct {
	// Defaults apply to every tool.
	Defaults Policy `yaml:"defaults"`
	// Categories override Defaults for the tools of a category.
	Categories map[string]Policy `yaml:"categories" validate:"dive,keys,oneof=direct external_api mcp system_command subtask,endkeys"`
	// Tools override everything else for one tool, by name.
	Tools map[string]Policy `yaml:"tools" validate:"dive,keys,printascii,max=64,endkeys"`
	// Patterns add detectors of the operator's own kinds. They apply to
	// every tool; a policy's Detectors map can turn one off by kind.
	Patterns []Pattern `yaml:"patterns" validate:"max=200,dive"`
	// Allow lists literal values that are never redacted, such as a
	// documentation key or a role mailbox: a finding whose matched text
	// equals one of them exactly is kept.
	Allow []string `yaml:"allow" validate:"dive,required"`
	// StreamWindowBytes bounds what a streaming redactor holds back while
	// a line is incomplete (default 16 KiB). Lines longer than this are cut
	// outside any finding; a secret longer than the window could be split.
	StreamWindowBytes int `yaml:"stream_window_bytes" validate:"omitempty,gte=1024,lte=1048576"`
}

// Policy is one layer of settings.
type Policy struct {
	Input  InputPolicy  `yaml:"input"`
	Output OutputPolicy `yaml:"output"`
	// Detectors turns kinds on or off by name, e.g. {ip_address: true,
	// phone_number: false}. Names are BuiltinKinds or a Pattern's kind.
	Detectors map[string]bool `yaml:"detectors" validate:"dive,keys,required,endkeys"`
}

// InputPolicy governs every string of a call's arguments, after schema
// validation and before the tool runs.
type InputPolicy struct {
	// ControlChars is "refuse" (default: a validation_error naming the
	// argument) or "strip". NUL, C0 controls other than tab, newline and
	// carriage return, DEL, C1 controls and invalid UTF-8 count.
	ControlChars string `yaml:"control_chars" validate:"omitempty,oneof=refuse strip"`
	// MaxStringBytes caps one string (default 1 MiB).
	MaxStringBytes int `yaml:"max_string_bytes" validate:"gte=0"`
	// MaxTotalBytes caps all strings and keys together (default 4 MiB).
	MaxTotalBytes int `yaml:"max_total_bytes" validate:"gte=0"`
	// Secrets is "redact" (the tool sees [REDACTED:<kind>]), "block"
	// (security_error secret_blocked naming the kind and the argument) or
	// "off". Default off, except for tools whose arguments leave the host
	// (external_api, mcp, subtask: redact).
	Secrets string `yaml:"secrets" validate:"omitempty,oneof=redact block off"`
	// PII is the same for personal data (block answers pii_blocked).
	// Default off, except subtask (redact): a consulted model is a third
	// party.
	PII string `yaml:"pii" validate:"omitempty,oneof=redact block off"`
}

// OutputPolicy governs a tool's result, its streamed chunks and the
// messages of its errors.
type OutputPolicy struct {
	// Secrets is "redact" (default) or "off".
	Secrets string `yaml:"secrets" validate:"omitempty,oneof=redact off"`
	// PII is "redact" (default) or "off".
	PII string `yaml:"pii" validate:"omitempty,oneof=redact off"`
	// MaxBytes caps the result's JSON (default 1 MiB). Longer strings are
	// cut with a "[TRUNCATED: N bytes]" marker so the result stays valid
	// JSON of the same shape.
	MaxBytes int `yaml:"max_bytes" validate:"omitempty,gte=1024"`
	// StripANSI removes terminal escape sequences and control characters
	// other than tab, newline and carriage return. Default on for
	// system_command tools, off elsewhere (file contents stay exact).
	StripANSI *bool `yaml:"strip_ansi"`
}

// Pattern is a custom detector.
type Pattern struct {
	// Kind names what it finds: lower case, digits and _, not a built-in.
	Kind string `yaml:"kind" validate:"required,max=64"`
	// Regex is RE2 syntax (Go regexp). A literal prefix ("acme_[0-9a-f]{32}")
	// keeps clean text fast: the regexp runs only where the prefix occurs.
	Regex string `yaml:"regex" validate:"required"`
	// Class is "secret" (default) or "pii": which input and output modes
	// apply.
	Class string `yaml:"class" validate:"omitempty,oneof=secret pii"`
	// Group redacts only that capture group (0, the default: the whole
	// match), e.g. the value of "acme_key=(\w+)".
	Group int `yaml:"group" validate:"gte=0"`
}

// Defaults of the settings a zero Config leaves unset.
const (
	DefaultMaxOutputBytes    = 1 << 20
	DefaultMaxStringBytes    = 1 << 20
	DefaultMaxTotalBytes     = 4 << 20
	DefaultStreamWindowBytes = 16 << 10
)

func ptr[T any](v T) *T { return &v }

// builtinPolicy is the bottom layer.
var builtinPolicy = Policy{
	Input:  InputPolicy{ControlChars: "refuse", MaxStringBytes: DefaultMaxStringBytes, MaxTotalBytes: DefaultMaxTotalBytes, Secrets: "off", PII: "off"},
	Output: OutputPolicy{Secrets: "redact", PII: "redact", MaxBytes: DefaultMaxOutputBytes, StripANSI: ptr(false)},
}

// CategoryDefaults returns the built-in layer for a category: what its
// tools do differently from the global defaults, and why.
func CategoryDefaults(c tools.Category) Policy {
	switch c {
	case tools.SystemCommand: // terminal output: colours, cursor moves
		return Policy{Output: OutputPolicy{StripANSI: ptr(true)}}
	case tools.ExternalAPI, tools.MCP: // arguments leave the host
		return Policy{Input: InputPolicy{Secrets: "redact"}}
	case tools.Subtask: // arguments go to another model
		return Policy{Input: InputPolicy{Secrets: "redact", PII: "redact"}}
	}
	return Policy{}
}

// over returns p with every field o sets taken from o.
func (p Policy) over(o Policy) Policy {
	pick := func(a, b string) string {
		if b != "" {
			return b
		}
		return a
	}
	pickN := func(a, b int) int {
		if b != 0 {
			return b
		}
		return a
	}
	p.Input.ControlChars = pick(p.Input.ControlChars, o.Input.ControlChars)
	p.Input.MaxStringBytes = pickN(p.Input.MaxStringBytes, o.Input.MaxStringBytes)
	p.Input.MaxTotalBytes = pickN(p.Input.MaxTotalBytes, o.Input.MaxTotalBytes)
	p.Input.Secrets = pick(p.Input.Secrets, o.Input.Secrets)
	p.Input.PII = pick(p.Input.PII, o.Input.PII)
	p.Output.Secrets = pick(p.Output.Secrets, o.Output.Secrets)
	p.Output.PII = pick(p.Output.PII, o.Output.PII)
	p.Output.MaxBytes = pickN(p.Output.MaxBytes, o.Output.MaxBytes)
	if o.Output.StripANSI != nil {
		p.Output.StripANSI = o.Output.StripANSI
	}
	if len(o.Detectors) > 0 {
		m := make(map[string]bool, len(p.Detectors)+len(o.Detectors))
		for k, v := range p.Detectors {
			m[k] = v
		}
		for k, v := range o.Detectors {
			m[k] = v
		}
		p.Detectors = m
	}
	return p
}

var kindNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ConfigError lists every problem of a Config; paths are relative to the
// sanitize section ("patterns[2].regex", "tools.grep.detectors.ssn"), so
// toold's config loader can prefix them with "sanitize.".
type ConfigError struct {
	Problems []ConfigProblem
}

// ConfigProblem is one setting and what is wrong with it.
type ConfigProblem struct {
	Path, Message string
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Path + ": " + p.Message
	}
	return "sanitize config: " + strings.Join(lines, "; ")
}

// Validate checks what struct tags cannot: regexps compile, kinds exist,
// and (again, for callers that skip validator/v10) the enumerations. It
// returns a *ConfigError; New calls it.
func (c *Config) Validate() error {
	var probs []ConfigProblem
	add := func(path, format string, args ...any) {
		probs = append(probs, ConfigProblem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	known := map[string]bool{}
	for _, k := range BuiltinKinds() {
		known[k] = true
	}
	for i, p := range c.Patterns {
		path := fmt.Sprintf("patterns[%d]", i)
		switch {
		case !kindNameRE.MatchString(p.Kind):
			add(path+".kind", "%q must be lower case letters, digits and _", p.Kind)
		case known[p.Kind]:
			add(path+".kind", "%q is already a kind (built-in or an earlier pattern)", p.Kind)
		}
		known[p.Kind] = true
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			add(path+".regex", "does not compile: %v", err)
		} else if p.Group < 0 || p.Group > re.NumSubexp() {
			add(path+".group", "%d is not a capture group of the regex (it has %d)", p.Group, re.NumSubexp())
		}
		if p.Class != "" && p.Class != "secret" && p.Class != "pii" {
			add(path+".class", "%q is not one of: secret, pii", p.Class)
		}
	}
	c.validatePolicy("defaults", c.Defaults, known, add)
	for _, name := range sortedKeys(c.Categories) {
		if !tools.Category(name).Valid() {
			add("categories."+name, "is not a tool category")
		}
		c.validatePolicy("categories."+name, c.Categories[name], known, add)
	}
	for _, name := range sortedKeys(c.Tools) {
		c.validatePolicy("tools."+name, c.Tools[name], known, add)
	}
	if w := c.StreamWindowBytes; w != 0 && (w < 1024 || w > 1<<20) {
		add("stream_window_bytes", "must be between 1024 and 1048576")
	}
	if len(probs) == 0 {
		return nil
	}
	return &ConfigError{Problems: probs}
}

func (c *Config) validatePolicy(path string, p Policy, known map[string]bool, add func(string, string, ...any)) {
	oneOf := func(field, v string, allowed ...string) {
		if v != "" && !slices.Contains(allowed, v) {
			add(path+"."+field, "%q is not one of: %s", v, strings.Join(allowed, ", "))
		}
	}
	oneOf("input.control_chars", p.Input.ControlChars, "refuse", "strip")
	oneOf("input.secrets", p.Input.Secrets, "redact", "block", "off")
	oneOf("input.pii", p.Input.PII, "redact", "block", "off")
	oneOf("output.secrets", p.Output.Secrets, "redact", "off")
	oneOf("output.pii", p.Output.PII, "redact", "off")
	if p.Input.MaxStringBytes < 0 || p.Input.MaxTotalBytes < 0 {
		add(path+".input", "byte caps must not be negative")
	}
	if m := p.Output.MaxBytes; m != 0 && m < 1024 {
		add(path+".output.max_bytes", "must be at least 1024")
	}
	for _, k := range sortedKeys(p.Detectors) {
		if !known[k] {
			add(path+".detectors."+k, "is not a detector kind (built-in: %s; or a pattern's kind)", strings.Join(BuiltinKinds(), ", "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compilePatterns turns validated patterns into rules with kind ids after
// the built-ins.
func compilePatterns(ps []Pattern) ([]kindInfo, []customRule) {
	kinds := append([]kindInfo(nil), builtinKinds[:]...)
	var rules []customRule
	for _, p := range ps {
		re := regexp.MustCompile(p.Regex) // Validate compiled it already
		cl := classSecret
		if p.Class == "pii" {
			cl = classPII
		}
		kinds = append(kinds, kindInfo{name: p.Kind, class: cl})
		rules = append(rules, customRule{kind: kindID(len(kinds) - 1), re: re, group: p.Group, prefix: literalPrefix(p.Regex)})
	}
	return kinds, rules
}

// literalPrefix returns a literal every match must start with ("" when
// there is none, as for (?i) patterns: those run on every text).
func literalPrefix(expr string) string {
	prefix, _ := regexp.MustCompile(expr).LiteralPrefix()
	return prefix
}
