package sanitize

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/tools"
)

func output(t *testing.T, s *Sanitizer, spec *tools.Spec, data string) (string, Report) {
	t.Helper()
	out, rep, err := s.Output(context.Background(), spec, json.RawMessage(data))
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(out) || len(out) < 1<<16 && !json.Valid(out) {
		t.Fatalf("invalid output %.200q", out)
	}
	return string(out), rep
}

func TestOutputBehaviour(t *testing.T) {
	on, off := true, false
	cases := []struct {
		name  string
		cfg   Config
		spec  *tools.Spec
		data  string
		want  string
		notes []string // substrings, one per note
	}{
		{name: "clean is returned as is", spec: directSpec, data: `{"a": [1, 2.5e3, true, null], "s": "x\ny"}`, want: `{"a": [1, 2.5e3, true, null], "s": "x\ny"}`},
		{name: "redaction on by default", spec: directSpec, data: `{"content":"key AKIAQYLPMN5HHHFPZAM2\n"}`, want: `{"content":"key [REDACTED:aws_access_key_id]\n"}`},
		{name: "sensitive keys redact their values", spec: directSpec, data: `{"password":"hunter two","private_key":"-----BEGIN PRIVATE KEY-----\nAB==\n-----END PRIVATE KEY-----\n","next_token":"abcdefgh123","token":"abcdefgh123"}`,
			want: `{"password":"[REDACTED:password]","private_key":"[REDACTED:gcp_service_account_key]","next_token":"abcdefgh123","token":"[REDACTED:secret]"}`},
		{name: "card numbers as JSON numbers", spec: directSpec, data: `{"pan":4111111111111111,"ts":1763719200123}`, want: `{"pan":"[REDACTED:payment_card]","ts":1763719200123}`},
		{name: "e-mail keys with collisions", spec: directSpec, data: `{"a@example.com":1,"b@example.com":2}`, want: `{"[REDACTED:email]":1,"[REDACTED:email]#2":2}`},
		{name: "ANSI stripped for system_command", spec: commandSpec, data: `{"stdout":"\u001b[1;31mFAIL\u001b[0m ok\u001b]0;title\u0007 \u0008x"}`, want: `{"stdout":"FAIL ok x"}`, notes: []string{"removed 4 terminal escape"}},
		{name: "ANSI kept for direct tools", spec: directSpec, data: `{"s":"\u001b[1mB"}`, want: `{"s":"\u001b[1mB"}`},
		{name: "ANSI stripping configurable", cfg: Config{Tools: map[string]Policy{"write_file": {Output: OutputPolicy{StripANSI: &on}}}, Categories: map[string]Policy{"system_command": {Output: OutputPolicy{StripANSI: &off}}}},
			spec: directSpec, data: `{"s":"\u001b[1mB"}`, want: `{"s":"B"}`, notes: []string{"removed 1"}},
		{name: "invalid UTF-8 (binary output) noted", spec: commandSpec, data: "{\"stdout\":\"PNG\\ufffd\\ufffd\\u0000ok\"}", want: "{\"stdout\":\"PNG\uFFFD\uFFFDok\"}", notes: []string{"replaced 2 invalid UTF-8 byte(s) with U+FFFD (first at /stdout)", "removed 1"}},
		{name: "raw invalid bytes repaired", spec: directSpec, data: "{\"s\":\"a\xff\xfeb\"}", want: `{"s":"a` + "\uFFFD\uFFFD" + `b"}`, notes: []string{"replaced 2 invalid"}},
		{name: "output redaction off for PII", cfg: Config{Tools: map[string]Policy{"write_file": {Output: OutputPolicy{PII: "off"}}}}, spec: directSpec,
			data: `{"s":"jane@example.com AKIAQYLPMN5HHHFPZAM2"}`, want: `{"s":"jane@example.com [REDACTED:aws_access_key_id]"}`},
		{name: "not JSON comes back as a string", spec: directSpec, data: `{"a": tru`, want: `"{\"a\": tru"`, notes: []string{"not valid JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTB(t, c.cfg)
			got, rep := output(t, s, c.spec, c.data)
			if got != c.want {
				t.Errorf("got  %.300s\nwant %.300s", got, c.want)
			}
			if len(rep.Notes) != len(c.notes) {
				t.Fatalf("notes %q, want %d", rep.Notes, len(c.notes))
			}
			for i, n := range c.notes {
				if !strings.Contains(rep.Notes[i], n) {
					t.Errorf("note %q lacks %q", rep.Notes[i], n)
				}
			}
		})
	}
}

func TestOutputTruncation(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: 4096}}})
	big := strings.Repeat("0123456789abcdef", 1024)
	data, _ := json.Marshal(map[string]any{"stdout": big, "stderr": "short", "code": 1, "lines": []string{big[:3000], "x"}})
	got, rep := output(t, s, commandSpec, string(data))
	if len(got) > 4096 || !rep.Truncated || rep.OriginalBytes != len(data) {
		t.Fatalf("len %d report %+v", len(got), rep)
	}
	var v struct {
		Stdout, Stderr string
		Code           int
		Lines          []string
	}
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Fatal(err)
	}
	if v.Stderr != "short" || v.Code != 1 || len(v.Lines) != 2 || !strings.Contains(v.Stdout, "[TRUNCATED: ") || !strings.HasPrefix(v.Stdout, "0123456789") {
		t.Errorf("shape not kept: %+v", v)
	}
	// Water-filling: both long strings are cut to about the same length.
	if d := len(v.Stdout) - len(v.Lines[0]); d > 64 || d < -64 {
		t.Errorf("cut unevenly: %d vs %d", len(v.Stdout), len(v.Lines[0]))
	}
}

func TestOutputTruncationFallback(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: 2048}}})
	nums := make([]int, 2000)
	data, _ := json.Marshal(nums)
	got, rep := output(t, s, directSpec, string(data))
	var v struct {
		Truncated     bool   `json:"truncated"`
		OriginalBytes int    `json:"original_bytes"`
		PartialJSON   string `json:"partial_json"`
	}
	if err := json.Unmarshal([]byte(got), &v); err != nil || !v.Truncated || v.OriginalBytes != len(data) || !strings.HasPrefix(v.PartialJSON, "[0,0,") || len(got) > 2048 || !rep.Truncated {
		t.Fatalf("fallback %s (%v)", got, err)
	}
}

func TestOutputDeepNesting(t *testing.T) {
	s := newTB(t, Config{})
	data := strings.Repeat(`{"a":[`, 10000) + `"jane@example.com"` + strings.Repeat(`]}`, 10000)
	got, rep := output(t, s, directSpec, data)
	want := strings.Replace(data, "jane@example.com", "[REDACTED:email]", 1)
	if rep.Redactions != 1 || got != want {
		t.Fatalf("report %+v, output as expected: %v", rep, got == want)
	}
}

func TestTextAndLogHelpers(t *testing.T) {
	s := newTB(t, Config{Tools: map[string]Policy{"echo": {Output: OutputPolicy{Secrets: "off", PII: "off"}}}})
	msg, rep := s.Text(commandSpec, "open /srv/app.env: password=Tr0ub4dor\x1b[0m\xff")
	if msg != "open /srv/app.env: password=[REDACTED:password]" || rep.Redactions != 1 || len(rep.Notes) != 1 {
		t.Errorf("Text: %q %+v", msg, rep)
	}
	// Logs are redacted even for a tool whose output redaction is off.
	echo := &tools.Spec{Name: "echo", Category: tools.Direct}
	if got, _ := output(t, s, echo, `{"s":"jane@example.com"}`); got != `{"s":"jane@example.com"}` {
		t.Errorf("output off: %s", got)
	}
	if got := string(s.RedactJSON("echo", []byte(`{"s":"jane@example.com"}`))); got != `{"s":"[REDACTED:email]"}` {
		t.Errorf("RedactJSON: %s", got)
	}
	if got := s.RedactString("echo", "to jane@example.com"); got != "to [REDACTED:email]" {
		t.Errorf("RedactString: %s", got)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{Defaults: Policy{Input: InputPolicy{Secrets: "block"}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	output(t, s, directSpec, `{"a":"jane@example.com","b":"x@example.org"}`)
	_, _, _ = s.Input(context.Background(), directSpec, map[string]any{"t": ghToken})
	if got := testutil.ToFloat64(s.metrics.redactions.WithLabelValues("write_file", "output", "email")); got != 2 {
		t.Errorf("redactions = %v", got)
	}
	if got := testutil.ToFloat64(s.metrics.blocked.WithLabelValues("write_file", "github_token")); got != 1 {
		t.Errorf("blocked = %v", got)
	}
	if _, err := New(Config{}, reg); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
	if _, err := New(Config{}, prometheus.NewRegistry()); err != nil {
		t.Errorf("a second registry: %v", err)
	}
}

// TestOutputBinaryThroughMarshal: a command printing binary, marshaled as
// dispatch does, comes back as valid UTF-8 JSON with a note.
func TestOutputBinaryThroughMarshal(t *testing.T) {
	s := newTB(t, Config{})
	data, err := json.Marshal(struct {
		Stdout string `json:"stdout"`
	}{"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"})
	if err != nil {
		t.Fatal(err)
	}
	got, rep := output(t, s, commandSpec, string(data))
	if !strings.Contains(got, "PNG") || len(rep.Notes) != 2 || !strings.Contains(rep.Notes[0], "replaced 3 invalid UTF-8 byte(s) with U+FFFD (first at /stdout)") {
		t.Errorf("%s %q", got, rep.Notes)
	}
}

// TestOutputBudget: a result over its budget comes back as a head that
// fits, marked, and as the whole, sanitized alike; a secret planted past
// the head is redacted in the whole.
func TestOutputBudget(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &tools.Spec{Name: "big", Category: tools.Direct}
	secret := "AKIA" + "IOSFODNN7EXAMPLE"
	content := strings.Repeat("line of text\n", 100_000) + "aws_key=" + secret + "\n"
	data, _ := json.Marshal(map[string]any{"content": content, "files_read": 1})
	head, whole, rep, err := s.OutputBudget(context.Background(), spec, data, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(head) > 4096 || !json.Valid(head) || !strings.Contains(string(head), "[TRUNCATED: ") {
		t.Fatalf("the head is %d bytes, valid %v, marked %v", len(head), json.Valid(head), strings.Contains(string(head), "[TRUNCATED: "))
	}
	if !rep.Truncated || rep.OriginalBytes != len(data) || rep.Redactions != 1 {
		t.Errorf("report %+v: want truncated, the original size and the one redaction", rep)
	}
	if !json.Valid(whole) || strings.Contains(string(whole), secret) || !strings.Contains(string(whole), "[REDACTED:") {
		t.Fatalf("the whole (%d bytes) is invalid or carries the secret unredacted", len(whole))
	}
	var got map[string]any
	if err := json.Unmarshal(whole, &got); err != nil || !strings.HasPrefix(got["content"].(string), strings.Repeat("line of text\n", 100_000)) {
		t.Fatal("the whole lost part of the result")
	}
	head, whole, _, _ = s.OutputBudget(context.Background(), spec, []byte(`{"small":true}`), 4096)
	if string(head) != `{"small":true}` || whole != nil {
		t.Errorf("a result within its budget: head %s, whole %s", head, whole)
	}
	// No budget: the output cap alone, and the whole of what it cut.
	head, whole, _, _ = s.OutputBudget(context.Background(), spec, data, 0)
	if len(head) > DefaultMaxOutputBytes || len(head) < 4096 || whole == nil {
		t.Errorf("without a budget the head is %d bytes (whole kept: %v)", len(head), whole != nil)
	}
}
