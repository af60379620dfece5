package sanitize

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-playground/validator/v10"
	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/tools"
)

// exampleYAML is the README's example block: it must decode strictly and
// pass both validations.
const exampleYAML = `
defaults:
  input:
    control_chars: refuse
    max_string_bytes: 262144
  output:
    max_bytes: 1048576
  detectors:
    ip_address: true
categories:
  external_api:
    input: {secrets: block}
tools:
  crm_lookup:
    output: {pii: "off"}
  run_command:
    output: {strip_ansi: true}
patterns:
  - {kind: acme_api_key, regex: 'acme_[0-9a-f]{32}'}
  - {kind: employee_id, regex: 'emp=(E[0-9]{6})', group: 1, class: pii}
allow:
  - AKIAIOSFODNN7EXAMPLE
  - noreply@acme.example
stream_window_bytes: 16384
`

func TestConfigYAMLAndValidatorTags(t *testing.T) {
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader(exampleYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	v := validator.New(validator.WithRequiredStructEnabled())
	if err := v.Struct(cfg); err != nil {
		t.Fatalf("validator: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	bad := Config{Defaults: Policy{Input: InputPolicy{Secrets: "maybe"}}, Categories: map[string]Policy{"misc": {}}, StreamWindowBytes: 10}
	if err := v.Struct(bad); err == nil {
		t.Error("validator accepted a bad enum, category and window")
	}
}

func TestConfigValidateNamesTheProblem(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Patterns: []Pattern{{Kind: "k", Regex: "a("}}}, "patterns[0].regex: does not compile"},
		{Config{Patterns: []Pattern{{Kind: "email", Regex: "x"}}}, `patterns[0].kind: "email" is already a kind`},
		{Config{Patterns: []Pattern{{Kind: "Bad-Kind", Regex: "x"}}}, "patterns[0].kind"},
		{Config{Patterns: []Pattern{{Kind: "k", Regex: "x", Group: 2}}}, "patterns[0].group"},
		{Config{Tools: map[string]Policy{"grep": {Detectors: map[string]bool{"ssn": true}}}}, "tools.grep.detectors.ssn: is not a detector kind"},
		{Config{Defaults: Policy{Output: OutputPolicy{Secrets: "block"}}}, `defaults.output.secrets: "block" is not one of: redact, off`},
		{Config{Categories: map[string]Policy{"misc": {}}}, "categories.misc: is not a tool category"},
		{Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: 100}}}, "defaults.output.max_bytes"},
	}
	for _, c := range cases {
		_, err := New(c.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.HasPrefix(c.want, ce.Problems[0].Path) {
			t.Errorf("New(%+v): problems %+v", c.cfg, ce)
		}
	}
}

// TestZeroConfigDefaults documents the built-in policy per category.
func TestZeroConfigDefaults(t *testing.T) {
	s := newTB(t, Config{})
	for _, c := range []struct {
		cat            tools.Category
		inSec, inPII   string
		strip          bool
		outRedactsMail bool
	}{
		{tools.Direct, "off", "off", false, true},
		{tools.ExternalAPI, "redact", "off", false, true},
		{tools.MCP, "redact", "off", false, true},
		{tools.SystemCommand, "off", "off", true, true},
		{tools.Subtask, "redact", "redact", false, true},
	} {
		p := s.policyFor(&tools.Spec{Name: "t_" + string(c.cat), Category: c.cat})
		if p.in.Secrets != c.inSec || p.in.PII != c.inPII || p.strip != c.strip || p.in.ControlChars != "refuse" ||
			p.out.MaxBytes != DefaultMaxOutputBytes || p.output.on[kEmail] != c.outRedactsMail || p.output.on[kIPAddress] {
			t.Errorf("%s: %+v %+v strip=%v", c.cat, p.in, p.out, p.strip)
		}
	}
}

// TestLayering: built-in < category built-in < defaults < categories <
// tools, field by field.
func TestLayering(t *testing.T) {
	s := newTB(t, Config{
		Defaults:   Policy{Input: InputPolicy{Secrets: "block", MaxStringBytes: 100}, Detectors: map[string]bool{"email": false}},
		Categories: map[string]Policy{"subtask": {Input: InputPolicy{PII: "block"}, Detectors: map[string]bool{"phone_number": false}}},
		Tools:      map[string]Policy{"consult": {Input: InputPolicy{MaxStringBytes: 50}, Detectors: map[string]bool{"email": true}}},
	})
	p := s.policyFor(&tools.Spec{Name: "consult", Category: tools.Subtask})
	if p.in.Secrets != "block" || p.in.PII != "block" || p.in.MaxStringBytes != 50 || p.in.MaxTotalBytes != DefaultMaxTotalBytes {
		t.Errorf("input %+v", p.in)
	}
	if !p.input.on[kEmail] || p.input.on[kPhone] || !p.input.on[kGitHubToken] {
		t.Error("detector toggles not merged key by key")
	}
	other := s.policyFor(&tools.Spec{Name: "other", Category: tools.Subtask})
	if other.input.on[kEmail] || other.in.MaxStringBytes != 100 {
		t.Errorf("tool override leaked to another tool: %+v", other.in)
	}
}

func TestKindsListed(t *testing.T) {
	s := newTB(t, Config{Patterns: []Pattern{{Kind: "acme", Regex: "acme_x", Class: "pii"}}})
	got := strings.Join(s.Kinds(), ",")
	if !strings.HasPrefix(got, "aws_access_key_id (secret),") || !strings.HasSuffix(got, "ip_address (pii),acme (pii)") {
		t.Errorf("kinds %s", got)
	}
	var buf bytes.Buffer
	buf.WriteString(strings.Join(BuiltinKinds(), "\n"))
	if strings.Count(buf.String(), "\n")+1 != int(numBuiltin) {
		t.Error("BuiltinKinds incomplete")
	}
}
