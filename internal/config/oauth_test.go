package config

import (
	"strings"
	"testing"
)

// TestOAuthSection: auth.oauth is one issuer as a mapping or several as a
// list, with the keys of the issue; it lets toold listen beyond loopback;
// every problem is reported at its path.
func TestOAuthSection(t *testing.T) {
	one, err := Load(write(t, `
listen: 0.0.0.0:8080
auth:
  oauth:
    issuer: https://idp.example.com/realms/main
    audience: https://toold.example.com/mcp
    allow: []
    allow_http: false
    tools: ["*"]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Auth.OAuth) != 1 || one.Auth.OAuth[0].Audience != "https://toold.example.com/mcp" {
		t.Errorf("one issuer: %+v", one.Auth.OAuth)
	}
	two, err := Load(write(t, `
auth:
  oauth:
    - {issuer: https://a.example.com, audience: https://toold.example.com/mcp}
    - {issuer: https://b.example.com/, audience: https://toold.example.com/mcp, roles_claim: groups, roles: {approve: [approvers]}}
`), env(nil))
	if err != nil || len(two.Auth.OAuth) != 2 || two.Auth.OAuth[1].Roles["approve"][0] != "approvers" {
		t.Fatalf("two issuers: %v %+v", err, two)
	}
	_, err = Load(write(t, "auth:\n  oauth: {issuer: https://idp.example.com, audiense: x}\n"), env(nil))
	if got := problemMap(t, err)["auth.oauth.audiense"]; got != `unknown key (did you mean "audience"?)` {
		t.Errorf("a misspelt key: %v", err)
	}
	_, err = Load(write(t, `
auth:
  oauth:
    issuer: http://idp.example.com
    audience: x
    algorithms: [RS256, HS256, none]
    roles: {owner: [x]}
    tool_claims: [{claim: groups, value: a, tools: ["[bad"]}]
    introspection: {url: https://idp.example.com/introspect}
`), env(nil))
	got := problemMap(t, err)
	for path, want := range map[string]string{
		"auth.oauth.issuer":                  "plain http",
		"auth.oauth.algorithms":              `"HS256" is not an asymmetric JWS algorithm`,
		"auth.oauth.roles":                   `"owner" is not a role`,
		"auth.oauth.tool_claims.0.tools":     `pattern "[bad" is malformed`,
		"auth.oauth.introspection.client_id": "is required",
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("%s: %q, want %q (all: %v)", path, got[path], want, got)
		}
	}
}
