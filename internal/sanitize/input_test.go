package sanitize

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

var (
	directSpec  = &tools.Spec{Name: "write_file", Category: tools.Direct}
	httpSpec    = &tools.Spec{Name: "http_post", Category: tools.ExternalAPI}
	consultSpec = &tools.Spec{Name: "consult", Category: tools.Subtask}
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const ghToken = "ghp_aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3"

func TestInputPolicies(t *testing.T) {
	strip := Policy{Input: InputPolicy{ControlChars: "strip"}}
	caps := Policy{Input: InputPolicy{MaxStringBytes: 8, MaxTotalBytes: 20}}
	block := Policy{Input: InputPolicy{Secrets: "block", PII: "block"}}
	redact := Policy{Input: InputPolicy{Secrets: "redact", PII: "redact"}}
	cases := []struct {
		name   string
		cfg    Config
		spec   *tools.Spec
		args   string
		want   string // the sanitized arguments, when the call is accepted
		kind   tools.Kind
		code   string
		fields []string // JSON pointers of the refusal
	}{
		{name: "clean passes", spec: directSpec, args: `{"path":"a.txt","content":"line\n\tok\r\n"}`, want: `{"content":"line\n\tok\r\n","path":"a.txt"}`},
		{name: "NUL refused by default", spec: directSpec, args: `{"path":"a\u0000b"}`, kind: tools.SecurityError, code: "nul_byte", fields: []string{"/path"}},
		{name: "ESC refused in a nested array", spec: directSpec, args: `{"lines":["ok","\u001b[31mred"]}`, kind: tools.ValidationError, code: "control_character", fields: []string{"/lines/1"}},
		{name: "C1 control refused", spec: directSpec, args: `{"s":"a\u009bb"}`, kind: tools.ValidationError, code: "control_character", fields: []string{"/s"}},
		{name: "control char in a key refused", spec: directSpec, args: `{"a\u0007":"x"}`, kind: tools.ValidationError, code: "control_character", fields: []string{"/a\u0007"}},
		{name: "pointer escaping", spec: directSpec, args: `{"a/b~c":"\u0001"}`, kind: tools.ValidationError, code: "control_character", fields: []string{"/a~1b~0c"}},
		{name: "strip mode removes", cfg: Config{Defaults: strip}, spec: directSpec, args: `{"s":"a\u0000b\u001b[0mc","k\u0007":"v"}`, want: `{"k":"v","s":"ab[0mc"}`},
		{name: "per-string cap", cfg: Config{Defaults: caps}, spec: directSpec, args: `{"s":"123456789"}`, kind: tools.ValidationError, code: "too_long", fields: []string{"/s"}},
		{name: "total cap", cfg: Config{Defaults: caps}, spec: directSpec, args: `{"a":"12345678","b":"12345678","c":"1234"}`, kind: tools.ValidationError, code: "too_large", fields: []string{""}},
		{name: "secrets off by default for direct tools", spec: directSpec, args: `{"content":"token ` + ghToken + `"}`, want: `{"content":"token ` + ghToken + `"}`},
		{name: "secrets redacted by default for external_api", spec: httpSpec, args: `{"body":"token ` + ghToken + `","to":"jane@example.com"}`, want: `{"body":"token [REDACTED:github_token]","to":"jane@example.com"}`},
		{name: "PII redacted by default for subtask", spec: consultSpec, args: `{"q":"call +1 415 555 0132"}`, want: `{"q":"call [REDACTED:phone_number]"}`},
		{name: "redact mode", cfg: Config{Defaults: redact}, spec: directSpec, args: `{"a":["x","AKIAQYLPMN5HHHFPZAM2"]}`, want: `{"a":["x","[REDACTED:aws_access_key_id]"]}`},
		{name: "sensitive key redacted whole", cfg: Config{Defaults: redact}, spec: directSpec, args: `{"password":"correct horse","n":1}`, want: `{"n":1,"password":"[REDACTED:password]"}`},
		{name: "block mode names kinds and pointers", cfg: Config{Defaults: block}, spec: directSpec,
			args: `{"h":{"auth":"Bearer abcdef0123456789abcdef"},"to":"jane@example.com"}`, kind: tools.SecurityError, code: "secret_blocked", fields: []string{"/h/auth", "/to"}},
		{name: "PII-only block", cfg: Config{Defaults: block}, spec: directSpec, args: `{"to":"jane@example.com"}`, kind: tools.SecurityError, code: "pii_blocked", fields: []string{"/to"}},
		{name: "per-tool override beats category", cfg: Config{Tools: map[string]Policy{"http_post": {Input: InputPolicy{Secrets: "off"}}}}, spec: httpSpec,
			args: `{"body":"` + ghToken + `"}`, want: `{"body":"` + ghToken + `"}`},
		{name: "detector turned off", cfg: Config{Defaults: Policy{Input: InputPolicy{Secrets: "block"}, Detectors: map[string]bool{"github_token": false}}}, spec: directSpec,
			args: `{"body":"` + ghToken + `"}`, want: `{"body":"` + ghToken + `"}`},
		{name: "numbers and bools untouched", cfg: Config{Defaults: redact}, spec: directSpec, args: `{"n":4111111111111111,"b":true,"z":null}`, want: `{"b":true,"n":4111111111111111,"z":null}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTB(t, c.cfg)
			out, rep, err := s.Input(context.Background(), c.spec, decode(t, c.args))
			if c.kind != "" {
				te, ok := tools.AsError(err)
				if !ok || te.Kind != c.kind || string(te.Code) != c.code {
					t.Fatalf("err = %v, want %s/%s", err, c.kind, c.code)
				}
				var ptrs []string
				for _, f := range te.Fields {
					ptrs = append(ptrs, f.Pointer)
				}
				if d := cmp.Diff(c.fields, ptrs); d != "" {
					t.Errorf("fields (-want +got):\n%s", d)
				}
				if strings.Contains(te.Message, "abcdef0123456789") || strings.Contains(te.Message, "jane@") {
					t.Errorf("the error shows the value: %s", te.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := encode(t, out); got != c.want {
				t.Errorf("got  %s\nwant %s (report %+v)", got, c.want, rep)
			}
			if strings.Contains(c.want, "[REDACTED") && rep.Redactions == 0 {
				t.Errorf("no redaction reported: %+v", rep)
			}
		})
	}
}

func TestInputStripNote(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Input: InputPolicy{ControlChars: "strip"}}})
	_, rep, err := s.Input(context.Background(), directSpec, decode(t, `{"a":{"b":"x\u0000\u0000"}}`))
	if err != nil || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "2 control") || !strings.Contains(rep.Notes[0], "/a/b") {
		t.Fatalf("err %v notes %q", err, rep.Notes)
	}
}

// TestInputBadInput: deep nesting (no recursion), a huge string, a bare
// string root, invalid UTF-8 in a Go string.
func TestInputBadInput(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Input: InputPolicy{Secrets: "redact"}}})
	var deep any = "AKIAQYLPMN5HHHFPZAM2"
	for i := 0; i < 10000; i++ {
		if i%2 == 0 {
			deep = []any{deep}
		} else {
			deep = map[string]any{"k": deep}
		}
	}
	out, rep, err := s.Input(context.Background(), directSpec, deep)
	if err != nil || rep.Redactions != 1 {
		t.Fatalf("deep: err %v report %+v", err, rep)
	}
	for i := 0; i < 10000; i++ {
		if m, ok := out.(map[string]any); ok {
			out = m["k"]
		} else {
			out = out.([]any)[0]
		}
	}
	if out != "[REDACTED:aws_access_key_id]" {
		t.Errorf("deep leaf = %v", out)
	}
	huge := strings.Repeat("a", 1<<20+1)
	if _, _, err := s.Input(context.Background(), directSpec, map[string]any{"s": huge}); err == nil {
		t.Error("a string over the default 1 MiB cap was accepted")
	}
	if v, _, err := s.Input(context.Background(), directSpec, "ghp_aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3"); err != nil || v != "[REDACTED:github_token]" {
		t.Errorf("root string: %v %v", v, err)
	}
	if _, _, err := s.Input(context.Background(), directSpec, map[string]any{"s": "a\xffb"}); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}
