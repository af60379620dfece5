package fs

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// editSecretWS is a workspace with a secret in .env, whose file tools get
// the real output sanitizer's line redactor, as toold serves them.
func editSecretWS(t *testing.T) *testWS {
	t.Helper()
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tw := newTestWS(t, Options{Redactor: func() LineRedactor { return san.NewLineRedactor("grep") }})
	tw.write(t, map[string]string{".env": envWithSecret, "key.pem": "before\n" + pemKey + "after\n"})
	return tw
}

const envWithSecret = "APP=shop\nGITHUB_TOKEN=" + grepToken + "\nDEBUG=1\n"

// TestEditCannotRebuildASecret: a caller guessing the token one character
// at a time through edit_file's old_string ("GITHUB_TOKEN=ghp_Q", then
// "…ghp_Qm", …) gets the same answer for every guess, right or wrong, and
// the file is never changed; before, the one right guess was the only
// edit that succeeded (issue 16's grep oracle, through edit_file).
func TestEditCannotRebuildASecret(t *testing.T) {
	tw := editSecretWS(t)
	shown := tw.shownSHA(t, ".env")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	for step, known := range []string{"ghp_", "ghp_Q", "ghp_Qm7", grepToken[:len(grepToken)-1]} {
		answers := map[string][]string{} // answer -> guesses giving it
		for _, c := range alphabet {
			_, err := tw.exec(t, "edit_file", editArgsJSON(".env", "GITHUB_TOKEN="+known+string(c), "GITHUB_TOKEN=x", 0, shown))
			te, _ := tools.AsError(err)
			key := fmt.Sprint(err == nil)
			if te != nil {
				key = string(te.Code) + ": " + te.Message + " / " + te.Suggestion
			}
			answers[key] = append(answers[key], string(c))
		}
		if len(answers) != 1 {
			t.Fatalf("step %d: the answers tell guesses apart: %v", step, answers)
		}
		if got := tw.read(t, ".env"); got != envWithSecret {
			t.Fatalf("step %d: the file changed: %q", step, got)
		}
	}
	// The whole token, alone or with the line around it, is no match
	// either.
	for _, old := range []string{grepToken, "GITHUB_TOKEN=" + grepToken + "\n", "shop\nGITHUB_TOKEN=ghp_"} {
		_, err := tw.exec(t, "edit_file", editArgsJSON(".env", old, "x", 0, shown))
		if te, _ := tools.AsError(err); te == nil || te.Code != "occurrence_mismatch" || !strings.Contains(te.Message, "occurs 0 time(s)") {
			t.Errorf("old_string %q: %v", old, err)
		}
	}
}

// TestEditAroundASecret: the text around a secret is edited as usual and
// the secret stays; a redaction marker in old_string gets a suggestion.
func TestEditAroundASecret(t *testing.T) {
	cases := []struct {
		name, file, old, new, want, code string
	}{
		{"line before", ".env", "APP=shop", "APP=store", strings.Replace(envWithSecret, "shop", "store", 1), ""},
		{"line after", ".env", "DEBUG=1\n", "DEBUG=0\n", strings.Replace(envWithSecret, "DEBUG=1", "DEBUG=0", 1), ""},
		{"the secret's name", ".env", "GITHUB_TOKEN=", "GH_TOKEN=", strings.Replace(envWithSecret, "GITHUB_TOKEN=", "GH_TOKEN=", 1), ""},
		{"around a key block", "key.pem", "after\n", "end\n", "before\n" + pemKey + "end\n", ""},
		{"into a key block", "key.pem", "before\n-----BEGIN", "x", "", "occurrence_mismatch"},
		{"with the marker", ".env", "GITHUB_TOKEN=[REDACTED:github_token]", "GITHUB_TOKEN=x", "", "occurrence_mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tw := editSecretWS(t)
			_, err := tw.exec(t, "edit_file", editArgsJSON(c.file, c.old, c.new, 0, tw.shownSHA(t, c.file)))
			if c.code != "" {
				te, _ := tools.AsError(err)
				if te == nil || string(te.Code) != c.code {
					t.Fatalf("got %v, want code %s", err, c.code)
				}
				if strings.Contains(c.old, "[REDACTED:") && !strings.Contains(te.Suggestion, "redaction marker") {
					t.Errorf("suggestion %q does not explain the marker", te.Suggestion)
				}
				return
			}
			mustOK(t, err)
			if got := tw.read(t, c.file); got != c.want {
				t.Errorf("content %q, want %q", got, c.want)
			}
		})
	}
}

// markerRedactor redacts one known secret as the sanitizer would.
type markerRedactor struct{ secret, kind string }

func (m markerRedactor) Lines(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(m.secret), []byte("[REDACTED:"+m.kind+"]"))
}

// TestSecretSpans: a span covers the secret whole, also when the secret
// begins or ends with the bytes its marker begins or ends with.
func TestSecretSpans(t *testing.T) {
	cases := []struct{ secret, kind, line string }{
		{"s3cr3t", "k", "a=s3cr3t b\n"},
		{"[REDs3cr3t", "k", "a=[REDs3cr3t b\n"},
		{"s3cr3tk]", "k", "a=s3cr3tk] b\n"},
		{"[s3]", "k", "[s3]\n"},
		{"s3cr3t", "k", "no line break s3cr3t"},
	}
	for _, c := range cases {
		w := &Workspace{opts: Options{Redactor: func() LineRedactor { return markerRedactor{c.secret, c.kind} }}}
		data := []byte("first\n" + c.line + "last\n")
		spans := w.secretSpans(data)
		at := bytes.Index(data, []byte(c.secret))
		if len(spans) != 1 || spans[0][0] > at || spans[0][1] < at+len(c.secret) {
			t.Errorf("%q in %q: spans %v, want one covering [%d,%d)", c.secret, c.line, spans, at, at+len(c.secret))
		}
	}
	if spans := (&Workspace{}).secretSpans([]byte("a\n")); spans != nil {
		t.Errorf("no redactor, spans %v", spans)
	}
}
