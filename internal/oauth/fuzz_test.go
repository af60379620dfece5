package oauth

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseToken feeds the token parser and the claims checks whatever a
// client could send as a bearer token: they never panic, and never accept
// what the policy forbids (an algorithm outside the allow-list, a token
// past its size bound).
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		"eyJhbGciOiJSUzI1NiIsImtpZCI6ImsiLCJ0eXAiOiJKV1QifQ.eyJpc3MiOiJodHRwczovL2lkcC50ZXN0LyIsImF1ZCI6WyJ4Il0sImV4cCI6MTAwMDAwMDAwMDAsInN1YiI6ImEifQ.c2ln",
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.",
		"eyJhbGciOiJIUzI1NiJ9.e30.AAAA",
		"eyJhbGciOiJFUzI1NiIsImNyaXQiOlsiZXhwIl19.e30.AAAA",
		"eyJ..", "not-a-jwt", "eyJhbGciOiJSUzI1NiJ9.W10.AA",
	} {
		f.Add(s)
	}
	algs := defaultAlgorithms
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := parseJWT(raw, algs)
		if err != nil {
			return
		}
		if len(raw) > maxTokenBytes {
			t.Fatal("a token past the size bound was parsed")
		}
		if !strings.HasPrefix(string(p.alg), "RS") && !strings.HasPrefix(string(p.alg), "PS") &&
			!strings.HasPrefix(string(p.alg), "ES") && p.alg != "EdDSA" {
			t.Fatalf("the algorithm %q passed the allow-list", p.alg)
		}
		c, err := parseClaims(p.sig.UnsafePayloadWithoutVerification())
		if err != nil {
			return
		}
		is := &issuer{cfg: Config{Issuer: "https://idp.test/", Audience: "x", Skew: time.Second}, roles: roleValues(nil)}
		if _, err := is.checkClaims(c, time.Unix(1e9, 0)); err == nil {
			_ = is.principal(c) // maps any claims it accepted
		}
		_ = c.scopes()
		_ = c.actor()
		_ = c.values("a.b.c", true)
	})
}

// FuzzChallenge: whatever a value holds (a description quoting a claim,
// a Host header), the WWW-Authenticate written is one line of printable
// ASCII, and reads back as the same parameters with their values as
// sanitized.
func FuzzChallenge(f *testing.F) {
	f.Add("toold", "https://toold.test/.well-known/oauth-protected-resource/mcp", "invalid_token", `the token's "sub" is bad\`, "toold:call")
	f.Add("", "", "", "\r\nSet-Cookie: x=1", "a b")
	f.Fuzz(func(t *testing.T, realm, md, code, desc, scope string) {
		c := Challenge{Realm: realm, ResourceMetadata: md, Error: code, Description: desc, Scope: scope}
		h := c.String()
		for i := 0; i < len(h); i++ {
			if h[i] < 0x20 || h[i] > 0x7e {
				t.Fatalf("byte %#x in %q", h[i], h)
			}
		}
		got, err := parseChallenge(h)
		if err != nil {
			t.Fatalf("%q: %v", h, err)
		}
		want := map[string]string{}
		for name, v := range map[string]string{"realm": realm, "resource_metadata": md, "error": code, "error_description": desc, "scope": scope} {
			if v != "" {
				want[name] = sanitized(v)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q reads as %v, want %v", h, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%q: %s is %q, want %q", h, k, got[k], v)
			}
		}
	})
}

// TestChallenge: the challenges toold writes, as MCP clients read them.
func TestChallenge(t *testing.T) {
	for _, tt := range []struct {
		c    Challenge
		want string
	}{
		{Challenge{ResourceMetadata: "https://t.test/.well-known/oauth-protected-resource/mcp"},
			`Bearer resource_metadata="https://t.test/.well-known/oauth-protected-resource/mcp"`},
		{Challenge{ResourceMetadata: "https://t.test/m", Error: "invalid_token", Description: `bad "sub"`},
			`Bearer resource_metadata="https://t.test/m", error="invalid_token", error_description="bad ?sub?"`},
		{Challenge{Error: "insufficient_scope", Scope: "toold:approve"}, `Bearer error="insufficient_scope", scope="toold:approve"`},
		{Challenge{Realm: "toold"}, `Bearer realm="toold"`},
	} {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

func sanitized(v string) string {
	if len(v) > maxParam {
		v = v[:maxParam]
	}
	b := []byte(v)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b[i] = '?'
		}
	}
	return string(b)
}

// parseChallenge reads one Bearer challenge (RFC 9110 §11.3's
// auth-params), as a client would: a test's parser, strict.
func parseChallenge(h string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(h, "Bearer")
	if !ok {
		return nil, fmt.Errorf("no Bearer scheme")
	}
	out := map[string]string{}
	rest = strings.TrimPrefix(rest, " ")
	for rest != "" {
		name, after, ok := strings.Cut(rest, `="`)
		if !ok || name == "" || strings.ContainsAny(name, " ,=\"") {
			return nil, fmt.Errorf("bad parameter at %q", rest)
		}
		end := strings.IndexByte(after, '"')
		if end < 0 {
			return nil, fmt.Errorf("unterminated value at %q", after)
		}
		value := after[:end]
		if !utf8.ValidString(value) || strings.Contains(value, `\`) {
			return nil, fmt.Errorf("value %q needs unescaping", value)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s twice", name)
		}
		out[name] = value
		rest = after[end+1:]
		if rest != "" {
			if rest, ok = strings.CutPrefix(rest, ", "); !ok {
				return nil, fmt.Errorf("no separator at %q", rest)
			}
		}
	}
	return out, nil
}
