package delegate

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/credentials"
)

// FuzzMetadata: any document a resource or an authorization server
// answers is read without panicking, and what is accepted holds the rules:
// the resource or issuer asked, https endpoints, S256.
func FuzzMetadata(f *testing.F) {
	f.Add([]byte(`{"resource":"https://mcp.test/mcp","authorization_servers":["https://as.test"],"scopes_supported":["a"]}`))
	f.Add([]byte(`{"issuer":"https://as.test","authorization_endpoint":"https://as.test/a","token_endpoint":"https://as.test/t","code_challenge_methods_supported":["S256"]}`))
	f.Add([]byte(`{"issuer":"https://as.test","authorization_endpoint":"javascript:alert(1)","token_endpoint":"https://as.test/t","code_challenge_methods_supported":["S256"]}`))
	f.Add([]byte(`{"resource":"https://evil.test","authorization_servers":["http://x"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if md, err := ParseResourceMetadata(b, "https://mcp.test/mcp", false); err == nil {
			if !sameResource(md.Resource, "https://mcp.test/mcp") || len(md.AuthorizationServers) == 0 {
				t.Fatalf("accepted %+v", md)
			}
			for _, as := range md.AuthorizationServers {
				if !strings.HasPrefix(as, "https://") {
					t.Fatalf("accepted the authorization server %q", as)
				}
			}
		}
		if md, err := ParseServerMetadata(b, "https://as.test", false); err == nil {
			if md.Issuer != "https://as.test" || !strings.HasPrefix(md.AuthorizationEndpoint, "https://") || !strings.HasPrefix(md.TokenEndpoint, "https://") {
				t.Fatalf("accepted %+v", md)
			}
		}
		_, _, _ = ParseRegistration(201, b)
	})
}

// FuzzTokenResponse: any token endpoint answer is read without panicking;
// a grant holds tokens a header can carry, and a refusal's code and
// description are printable.
func FuzzTokenResponse(f *testing.F) {
	f.Add(200, []byte(`{"access_token":"a.b.c","token_type":"Bearer","expires_in":3600,"refresh_token":"r","scope":"x y"}`))
	f.Add(400, []byte(`{"error":"invalid_grant","error_description":"spent"}`))
	f.Add(200, []byte(`{"access_token":"a\nb","expires_in":1e300}`))
	f.Add(200, []byte(`{"access_token":"a","token_type":"mac"}`))
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		g, err := ParseTokenResponse(status, b, now)
		if err == nil {
			if !validToken(g.AccessToken) || g.RefreshToken != "" && !validToken(g.RefreshToken) || !g.Expiry.IsZero() && g.Expiry.Before(now) {
				t.Fatalf("accepted %+v", g)
			}
			return
		}
		if te, ok := err.(*TokenError); ok {
			for _, s := range []string{te.OAuthError, te.Description} {
				for i := 0; i < len(s); i++ {
					if s[i] < 0x20 || s[i] > 0x7e {
						t.Fatalf("an unprintable refusal: %q", s)
					}
				}
			}
		}
	})
}

// FuzzCallback: whatever a browser brings to the callback (its query, its
// cookies) and to the consent page (the flow parameter) is refused
// without a panic or a token, unless it is a flow toold began.
func FuzzCallback(f *testing.F) {
	kr, err := credentials.NewKeyring(credentials.NewKey(), nil)
	if err != nil {
		f.Fatal(err)
	}
	m, err := New(Options{Keys: kr, PublicURL: "https://toold.test"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("code=x&state=abc.def", "toold_connect_0011=zz", "dGMx")
	f.Add("error=access_denied&state=", "", "")
	f.Add("state="+strings.Repeat("a", 100)+"."+strings.Repeat("b", 24), "a=b", strings.Repeat("A", 300))
	f.Fuzz(func(t *testing.T, query, cookie, flow string) {
		if _, err := m.Open(flow); err == nil {
			t.Fatalf("a made-up flow %q opened", flow)
		}
		r := httptest.NewRequest("GET", "https://toold.test"+CallbackPath, nil)
		r.URL.RawQuery = query
		r.Header.Set("Cookie", cookie)
		if _, err := url.ParseQuery(query); err != nil {
			r.URL.RawQuery = url.QueryEscape(query)
		}
		if _, err := m.Finish(context.Background(), r, true); err == nil {
			t.Fatalf("a made-up callback finished: %q %q", query, cookie)
		}
	})
}
