package fakecli

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun: each stand-in answers in its CLI's format, as the presets run
// it, and refuses what the real one would.
func TestRun(t *testing.T) {
	cases := []struct {
		name, stdin string
		args        []string
		code        int
		out         string
	}{
		{"gemini", "Why?", []string{"--output-format", "json", "-m", "pro"}, 0, `{"response":"The stand-in gemini (model pro) read your prompt (Why?)`},
		{"codex", "", []string{"exec", "--skip-git-repo-check", "-m", "gpt-5", "--", "Why", "now?"}, 0, "The stand-in codex (model gpt-5) read your prompt (Why now?)"},
		{"cursor-agent", "", []string{"-p", "--output-format", "json", "--", "Why?"}, 0, `{"is_error":false,"result":"The stand-in cursor-agent (model default)`},
		{"claude", "Why?", []string{"-p", "--output-format", "json", "--model", "opus"}, 0, `"result":"The stand-in claude (model opus)`},
		{"claude", "", []string{"--version"}, 0, "claude 0.0.0 (toold's offline stand-in)\n"},
		{"gemini", "  \n", []string{"--output-format", "json"}, 2, ""},
		{"unknown", "Why?", nil, 64, ""},
	}
	for _, c := range cases {
		var out, errs bytes.Buffer
		code := Run(c.name, c.args, strings.NewReader(c.stdin), &out, &errs)
		if code != c.code || !strings.Contains(out.String(), c.out) || (code != 0) != (errs.Len() > 0) {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q", c.name, c.args, code, out.String(), errs.String(), c.code, c.out)
		}
	}
	if a := Answer("codex", "m", strings.Repeat("é", 100)); !strings.Contains(a, strings.Repeat("é", 30)+"…)") {
		t.Errorf("a long prompt is quoted cut at a rune: %s", a)
	}
}
