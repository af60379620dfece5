package fs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

const (
	grepToken = "ghp_Qm7Rk2Vx9LpT4sWz8Nd1Hc6Yb3Fj5Ga0Eu2K"
	pemKey    = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzQ8kq3\nR7vW2xYp4LmN9sT6\n-----END RSA PRIVATE KEY-----\n"
)

// secretWS is a workspace with secrets in several forms, whose grep
// results pass the real output sanitizer, as toold serves them. redact
// says whether grep gets the sanitizer's line redactor.
func secretWS(t *testing.T, redact bool) (run func(args string) grepResult) {
	t.Helper()
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{}
	if redact {
		opts.Redactor = func() LineRedactor { return san.NewLineRedactor("grep") }
	}
	tw := newTestWS(t, opts)
	tw.write(t, map[string]string{
		".env":      "APP=shop\nGITHUB_TOKEN=" + grepToken + "\nDEBUG=1\n",
		"token.b64": base64.StdEncoding.EncodeToString([]byte("token: "+grepToken)) + "\n",
		"key.pem":   pemKey,
		"long.txt":  strings.Repeat("x ", 240) + "t=" + grepToken + "\n",
		// The key's header ends the first block the redactor gets.
		"straddle.pem": strings.Repeat("filler line\n", redactBlock/12) + pemKey,
	})
	return func(args string) grepResult {
		t.Helper()
		var got grepResult
		if err := json.Unmarshal(tw.sanitized(t, san, "grep", args), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
}

// TestGrepCannotRebuildASecret: a caller guessing a token one character
// at a time ("ghp_Q", then "ghp_Qm", …) sees the same result for every
// guess, so 4 rounds of 62 calls teach it nothing; before, the one right
// guess matched a line (issue 16: a 40-character token rebuilt in 251
// calls).
func TestGrepCannotRebuildASecret(t *testing.T) {
	run := secretWS(t, true)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	known := "ghp_"
	for step := range 4 {
		results := map[string][]string{} // result -> guesses giving it
		for _, c := range alphabet {
			guess := known + string(c)
			got := run(`{"pattern":"` + regexp.QuoteMeta(guess) + `"}`)
			key := fmt.Sprint(len(got.Matches), got.FilesSearched)
			results[key] = append(results[key], string(c))
		}
		if len(results) != 1 {
			t.Fatalf("step %d: the results tell guesses apart: %v", step, results)
		}
		known = grepToken[:len(known)+1] // as if the caller had learnt it anyway
	}
}

// TestGrepSeesRedactedLines: what grep matches and returns is the
// redacted line, in every form the secret takes; the marker itself can
// be searched for.
func TestGrepSeesRedactedLines(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("token: " + grepToken))
	long := strings.Repeat("x ", 240) + "t=[REDACTED:github_t [... 5 more bytes]"
	cases := []struct {
		name, args string
		want       []string // Text of each match, in order
	}{
		{"marker", `{"pattern":"REDACTED:github_token"}`, []string{"GITHUB_TOKEN=[REDACTED:github_token]", long, "dG9rZW46[REDACTED:github_token]"}}, // "token:" stays
		{"plain token prefix", `{"pattern":"ghp_Qm7"}`, nil},
		{"base64 inside the run", `{"pattern":"` + enc[12:24] + `"}`, nil},
		{"private key body line", `{"pattern":"MIIEow|R7vW2"}`, nil},
		{"private key lines", `{"pattern":".","path_glob":"key.pem"}`,
			[]string{"[REDACTED:private_key]", "[REDACTED:private_key]", "[REDACTED:private_key]", "[REDACTED:private_key]"}},
		{"a cut line keeps no piece of a token", `{"pattern":"^x x","path_glob":"long.txt"}`,
			[]string{long}},
		{"other lines untouched", `{"pattern":"DEBUG"}`, []string{"DEBUG=1"}},
		{"a key across two blocks", `{"pattern":"MII|R7vW2|PRIVATE|^$","path_glob":"straddle.pem"}`, nil},
		{"each line of it marked", `{"pattern":"REDACTED","path_glob":"straddle.pem"}`,
			[]string{"[REDACTED:private_key]", "[REDACTED:private_key]", "[REDACTED:private_key]", "[REDACTED:private_key]"}},
	}
	run := secretWS(t, true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := run(tc.args)
			var texts []string
			for i, m := range got.Matches {
				texts = append(texts, m.Text)
				if m.Path == "straddle.pem" && m.Line != redactBlock/12+1+i {
					t.Errorf("line number %d for match %d", m.Line, i)
				}
			}
			if strings.Join(texts, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("matches %q\nwant %q", texts, tc.want)
			}
			if all := fmt.Sprint(got); strings.Contains(all, grepToken[4:14]) || strings.Contains(all, "MIIEow") {
				t.Errorf("a piece of a secret in %s", all)
			}
		})
	}
}

// BenchmarkGrepRedacted measures grep over 1 MiB of source-like text with
// and without the line redactor (the pattern matches nothing, so the
// figure is the cost of reading, redacting and matching every line).
func BenchmarkGrepRedacted(b *testing.B) {
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		fmt.Fprintf(&sb, "\tif err := handle(ctx, req.Items[%d], &opts); err != nil { // item %d of the batch\n", i%97, i)
		fmt.Fprintf(&sb, "\t\treturn fmt.Errorf(\"batch %%d: %%w\", %d, err)\n\t}\n", i)
	}
	for _, redact := range []bool{false, true} {
		b.Run(fmt.Sprintf("redact=%v", redact), func(b *testing.B) {
			opts := Options{}
			if redact {
				opts.Redactor = func() LineRedactor { return san.NewLineRedactor("grep") }
			}
			tw := newTestWS(b, opts)
			tw.write(b, map[string]string{"big.go": sb.String()})
			tl := tw.tool(b, "grep")
			call := tools.NewCall([]byte(`{"pattern":"zzz_never"}`), "req-1", "bench", nil)
			b.SetBytes(int64(sb.Len()))
			for b.Loop() {
				if _, err := tl.Execute(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
