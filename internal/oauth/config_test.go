package oauth

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckSaysWhatStartRefuses: an issuer (or its introspection endpoint)
// the outbound guard will refuse is a configuration problem at
// auth.oauth.allow, naming the value to set, found without any traffic —
// so -check-config says it, not the first token.
func TestCheckSaysWhatStartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" for no problem
	}{
		{"a loopback issuer, not allowed", Config{Issuer: "http://127.0.0.1:9998/", AllowHTTP: true},
			"allow: the issuer http://127.0.0.1:9998/ is refused by the outbound guard (127.0.0.1 is not a public address (loopback)); set auth.oauth.allow: [127.0.0.1]"},
		{"localhost, not allowed", Config{Issuer: "http://localhost:9998/", AllowHTTP: true},
			"set auth.oauth.allow: [localhost]"},
		{"a loopback issuer, allowed", Config{Issuer: "http://127.0.0.1:9998/", AllowHTTP: true, Allow: []string{"127.0.0.1"}}, ""},
		{"localhost, allowed by name", Config{Issuer: "http://localhost:9998/", AllowHTTP: true, Allow: []string{"localhost"}}, ""},
		{"a public issuer", Config{Issuer: "https://idp.example.com/realms/main"}, ""},
		{"plain http is reported once, as itself", Config{Issuer: "http://127.0.0.1:9998/"}, "issuer: \"http://127.0.0.1:9998/\" is plain http"},
		{"an internal introspection endpoint", Config{Issuer: "https://idp.example.com",
			Introspection: Introspection{ClientID: "c", URL: "https://10.1.2.3/introspect"}},
			"allow: the introspection.url https://10.1.2.3/introspect is refused by the outbound guard (10.1.2.3 is not a public address (private)); set auth.oauth.allow: [10.1.2.3]"},
		{"a malformed allow entry", Config{Issuer: "https://idp.example.com", Allow: []string{"10.0.0.0/99"}}, "allow: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Audience = "https://toold.example.com/mcp"
			err := Issuers{tc.c}.Check()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if tc.want != "" && strings.Count(got, "\n") > 0 {
				t.Errorf("more than one problem: %q", got)
			}
			var ps *problems
			if err != nil && !errors.As(err, &ps) {
				t.Errorf("not a problems list: %T", err)
			}
		})
	}
}
