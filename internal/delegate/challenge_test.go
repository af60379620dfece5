package delegate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseChallenges(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []Challenge
	}{
		{`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`,
			[]Challenge{{"bearer", map[string]string{"resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"}}}},
		{`Bearer realm="x", error="invalid_token", error_description="a \"quoted\", comma", scope="repo read:org"`,
			[]Challenge{{"bearer", map[string]string{"realm": "x", "error": "invalid_token", "error_description": `a "quoted", comma`, "scope": "repo read:org"}}}},
		{`Basic realm="api", Bearer scope=repo`,
			[]Challenge{{"basic", map[string]string{"realm": "api"}}, {"bearer", map[string]string{"scope": "repo"}}}},
		{`Negotiate abc123==, Bearer resource_metadata="u"`,
			[]Challenge{{"negotiate", map[string]string{}}, {"bearer", map[string]string{"resource_metadata": "u"}}}},
		{`BEARER Scope="a"`, []Challenge{{"bearer", map[string]string{"scope": "a"}}}},
		{`Bearer`, []Challenge{{"bearer", map[string]string{}}}},
		{`Bearer error="unterminated`, []Challenge{{"bearer", map[string]string{}}}},
		{`Bearer scope="a", scope="b"`, []Challenge{{"bearer", map[string]string{"scope": "a"}}}},
		{`"Bearer"`, nil},
		{``, nil},
		{`, ,`, nil},
	} {
		got := ParseChallenges([]string{tt.in})
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: %s", tt.in, diff)
		}
	}
	if p := Bearer(ParseChallenges([]string{`Basic realm=x`, `Bearer resource_metadata="m"`})); p["resource_metadata"] != "m" {
		t.Errorf("Bearer over two values: %v", p)
	}
}

// FuzzParseChallenges: any header parses, in bounded output, and what a
// well-formed challenge written back reads the same.
func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{`Bearer resource_metadata="https://x/y"`, `Basic realm="a", Bearer scope=b`,
		`Bearer error="x\"y", error_description="a,b"`, `Negotiate abc==`, `"`, `a=b=c`, strings.Repeat(`a, `, 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs := ParseChallenges([]string{s})
		if len(cs) > 16 {
			t.Fatalf("%d challenges", len(cs))
		}
		for _, c := range cs {
			if c.Scheme == "" || c.Scheme != strings.ToLower(c.Scheme) || len(c.Params) > 32 {
				t.Fatalf("%+v", c)
			}
			// Written back as a well-formed challenge, it reads the same.
			var b strings.Builder
			b.WriteString(c.Scheme)
			sep := " "
			for k, v := range c.Params {
				b.WriteString(sep + k + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`)
				sep = ", "
			}
			again := ParseChallenges([]string{b.String()})
			if len(c.Params) > 0 && (len(again) != 1 || !cmp.Equal(again[0].Params, c.Params)) {
				t.Fatalf("%q -> %+v -> %q -> %+v", s, c, b.String(), again)
			}
		}
	})
}
