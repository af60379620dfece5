package consult

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func mustPath(t testing.TB, s string) path {
	t.Helper()
	p, err := parsePath(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadOutput: how a CLI's stdout becomes an answer, a reported
// failure or a problem.
func TestReadOutput(t *testing.T) {
	for _, tc := range []struct {
		name, stdout, format, answer, errs string
		want                               reading
	}{
		{"text", "  The answer.\n\n", "text", "", "", reading{answer: "The answer."}},
		{"blank text", " \n\t", "text", "", "", reading{problem: "the provider printed no answer"}},
		{"gemini", `{"response": "Use a mutex.", "stats": {}}`, "json", "response", "error", reading{answer: "Use a mutex."}},
		{"gemini error", `{"response": "", "error": {"type": "ApiError", "message": "quota"}}`, "json", "response", "error",
			reading{failed: "quota"}},
		{"error without message", `{"error": {"code": 7}}`, "json", "response", "error", reading{failed: `{"code":7}`}},
		{"null error", `{"response": "ok", "error": null}`, "json", "response", "error", reading{answer: "ok"}},
		{"is_error", `{"is_error": true, "result": "Invalid API key"}`, "json", "result", "is_error", reading{failed: "Invalid API key"}},
		{"is_error false", `{"is_error": false, "result": "fine"}`, "json", "result", "is_error", reading{answer: "fine"}},
		{"nested path", `{"choices": [{"message": {"content": "deep"}}]}`, "json", "choices.0.message.content", "", reading{answer: "deep"}},
		{"index out of range", `{"choices": []}`, "json", "choices.0.message.content", "",
			reading{problem: "the provider's JSON has no answer at choices.0.message.content"}},
		{"not text", `{"response": {"text": "x"}}`, "json", "response", "", reading{problem: "the provider's JSON holds an object at response, not text"}},
		{"empty answer", `{"response": "  "}`, "json", "response", "", reading{problem: "the provider's answer at response is empty"}},
		{"notice before the JSON", "Loaded cached credentials.\n{\"response\": \"hi\"}\n", "json", "response", "",
			reading{answer: "hi"}},
		{"json lines", "{\"type\":\"init\"}\n{\"type\":\"result\",\"result\":\"done\"}", "json", "result", "",
			reading{answer: "done"}},
		{"garbage", "<html>oops</html>", "json", "response", "",
			reading{problem: `the provider's output is not the JSON expected: `}},
		{"duplicate keys", `{"response": "a", "response": "b"}`, "json", "response", "",
			reading{problem: `the provider's output is not the JSON expected: `}},
		{"nothing", "", "json", "response", "", reading{problem: "the provider printed nothing; JSON was expected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readOutput(tc.stdout, tc.format, mustPath(t, tc.answer), mustPath(t, tc.errs))
			if strings.HasSuffix(tc.want.problem, ": ") && strings.HasPrefix(got.problem, tc.want.problem) {
				got.problem = tc.want.problem
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(reading{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseChat: chat completion answers, including the ways servers
// differ and fail.
func TestParseChat(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		text, err  string
	}{
		{"openai", `{"id":"x","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":" Hi. "},` +
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, "Hi.", ""},
		{"content parts", `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}}]}`, "ab", ""},
		{"error object", `{"error":{"message":"model not loaded","type":"invalid_request_error"}}`, "", "the API reported a failure: model not loaded"},
		{"error string", `{"error":"overloaded"}`, "", "the API reported a failure: overloaded"},
		{"refusal", `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."}}]}`, "", "the model refused: I can't help with that."},
		{"tool calls only", `{"choices":[{"message":{"content":null,"tool_calls":[{}]},"finish_reason":"tool_calls"}]}`, "",
			`the model's answer is empty (finish_reason "tool_calls")`},
		{"no choices", `{"choices":[]}`, "", "no choices"},
		{"no message", `{"choices":[{"text":"legacy"}]}`, "", "no message"},
		{"content a number", `{"choices":[{"message":{"content":7}}]}`, "", "content is a number"},
		{"an array", `[1]`, "", "not a chat completion object"},
		{"not json", `<html>`, "", "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseChat([]byte(tc.body))
			if got.text != tc.text || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("text %q, err %v; want %q, %q", got.text, err, tc.text, tc.err)
			}
		})
	}
	a, _ := parseChat([]byte(`{"model":"m","choices":[{"message":{"content":"x"},"finish_reason":"length"}],"usage":{"total_tokens":5,"x":"y"}}`))
	if a.model != "m" || a.finishReason != "length" || a.usage["total_tokens"] != int64(5) || len(a.usage) != 1 {
		t.Errorf("%+v", a)
	}
}

func TestModelIDs(t *testing.T) {
	ids, err := modelIDs([]byte(`{"data":[{"id":"a"},{"id":""},{"x":1},"y",{"id":"b"},{"id":"c"}]}`), 2)
	if err != nil || strings.Join(ids, ",") != "a,b" {
		t.Errorf("%v %v", ids, err)
	}
	if _, err := modelIDs([]byte(`{"models":[]}`), 5); err == nil {
		t.Error("a list without data was read")
	}
}

// TestSynthesisPromptFits: whatever the answers, the prompt stays within
// its limit, keeps the question and names every answer.
func TestSynthesisPromptFits(t *testing.T) {
	long := strings.Repeat("é", 100_000)
	answers := []Response{{Tool: "a", Output: long}, {Tool: "b", Output: "short"}, {Tool: "c", Output: long}}
	got := synthesisPrompt("the question", answers, 30_000)
	if len(got) > 30_000 || !utf8.ValidString(got) || !has(got, "## Question\n\nthe question", "## Answer from a",
		"## Answer from b\n\nshort", "## Answer from c", "[… cut to fit the synthesis prompt]") {
		t.Errorf("%d bytes:\n%s", len(got), tools.CutUTF8(got, 600))
	}
}
