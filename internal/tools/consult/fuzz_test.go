package consult

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzReadOutput: whatever a CLI prints, reading it never panics, says
// exactly one thing (an answer, a failure or a problem), and an answer is
// trimmed text of a valid input.
func FuzzReadOutput(f *testing.F) {
	for _, s := range []string{`{"response": "hi", "stats": {}}`, `{"error": {"message": "x"}}`, `{"is_error": true, "result": "no"}`,
		"notice\n{\"response\":\"a\"}", "plain text", "", "{", `{"response": 1e999}`, `{"choices":[{"message":{"content":"c"}}]}`,
		strings.Repeat("[", 100), "\xff\xfe"} {
		f.Add(s, true, "response", "error")
		f.Add(s, false, "result", "is_error")
	}
	f.Fuzz(func(t *testing.T, stdout string, json bool, answer, errs string) {
		if !utf8.ValidString(answer) || !utf8.ValidString(errs) { // paths come from the YAML config
			return
		}
		ap, err1 := parsePath(answer)
		ep, err2 := parsePath(errs)
		if err1 != nil || err2 != nil {
			return
		}
		format := "text"
		if json {
			format = "json"
		}
		r := readOutput(stdout, format, ap, ep)
		set := 0
		for _, s := range []string{r.answer, r.failed, r.problem} {
			if s != "" {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("%+v: %d of answer, failed, problem set", r, set)
		}
		if r.answer != strings.TrimSpace(r.answer) {
			t.Fatalf("answer %q is not trimmed", r.answer)
		}
		if utf8.ValidString(stdout) && !utf8.ValidString(r.answer+r.failed+r.problem) {
			t.Fatalf("invalid UTF-8 out of a valid input: %+v", r)
		}
		if len(r.failed) > maxMessage+len("…") {
			t.Fatalf("failure message of %d bytes", len(r.failed))
		}
	})
}

// FuzzParseChat: whatever an API answers, parsing never panics; a success
// has trimmed, non-empty text.
func FuzzParseChat(f *testing.F) {
	for _, s := range []string{`{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`,
		`{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}`, `{"error":{"message":"no"}}`,
		`{"choices":[{"message":{"content":null,"refusal":"r"}}]}`, `{"choices":[]}`, `[]`, `null`, `{"usage":{"total_tokens":1e400}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := parseChat(body)
		if err == nil && (a.text == "" || a.text != strings.TrimSpace(a.text)) {
			t.Fatalf("success with text %q", a.text)
		}
		if _, err := modelIDs(body, 10); err == nil && !strings.Contains(string(body), "data") {
			t.Fatalf("a models list without data: %q", body)
		}
	})
}

// FuzzSynthesisPrompt: the synthesis prompt stays within its limit and
// valid UTF-8 whatever the answers.
func FuzzSynthesisPrompt(f *testing.F) {
	f.Add("question", "answer one", "answer two", 4000)
	f.Add(strings.Repeat("é", 300), strings.Repeat("x", 900), "", 2000)
	f.Fuzz(func(t *testing.T, q, a, b string, limit int) {
		if limit < 2000 || limit > 1<<17 || len(q)+len(a)+len(b) > 1<<18 ||
			!utf8.ValidString(q) || !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		got := synthesisPrompt(q, []Response{{Tool: "a", Output: a}, {Tool: "b", Output: b}}, limit)
		if len(got) > limit || !utf8.ValidString(got) {
			t.Fatalf("%d bytes for a limit of %d (valid UTF-8: %v)", len(got), limit, utf8.ValidString(got))
		}
	})
}
