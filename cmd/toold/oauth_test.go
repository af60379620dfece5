package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/oauth/oidctest"
	"github.com/toold/toold/internal/state/statetest"
)

// The identity tests: the real toold as an OAuth 2.1 resource server of a
// real OpenID Provider (internal/oauth/oidctest: zitadel/oidc's, built from
// test/oidc), both on loopback, driven over HTTP as MCP hosts and agent
// backends would.

var (
	idAlice = oidctest.User{ID: "u-alice", Username: "alice", Password: "alice-pw", Groups: []string{"approvers"}}
	idBob   = oidctest.User{ID: "u-bob", Username: "bob", Password: "bob-pw", Groups: []string{"approvers"}}
	idCarol = oidctest.User{ID: "u-carol", Username: "carol", Password: "carol-pw", Groups: []string{"readers"}}
	idDave  = oidctest.User{ID: "u-dave", Username: "dave", Password: "dave-pw", Groups: []string{"approvers"}}
)

const (
	oauthAgentKey = "toold_oauth_agent_key_for_the_tests"
	oauthOpsKey   = "toold_oauth_ops_key_for_the_tests_0"
)

// oauthWorld is a provider and a toold trusting it, on a port chosen first
// so that toold's resource URL (the tokens' audience) is its real one.
type oauthWorld struct {
	idp      *oidctest.Provider
	in       *instance
	resource string
	agent    oidctest.Client // a confidential client whose tokens are for toold
	stranger oidctest.Client // one whose tokens are for another resource
	console  oidctest.Client // the console's sign-in client
}

func newOAuthWorld(t *testing.T, extra string) *oauthWorld {
	t.Helper()
	return newOAuthWorldWith(t, "", "tools:\n  echo: {enabled: true}\n"+extra)
}

// newOAuthWorldWith adds oauth to auth.oauth's keys, and the rest of the
// configuration (tools and any other section).
func newOAuthWorldWith(t *testing.T, oauth, rest string) *oauthWorld {
	t.Helper()
	port := statetest.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	w := &oauthWorld{resource: base + "/mcp"}
	w.agent = oidctest.Client{ID: "agent", Secret: "agent-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{w.resource}}
	w.stranger = oidctest.Client{ID: "stranger", Secret: "stranger-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"},
		Audience: []string{"https://elsewhere.test/mcp"}}
	w.console = oidctest.Client{ID: "toold-console", Secret: "console-secret", RedirectURIs: []string{base + "/auth/callback"},
		Audience: []string{w.resource}}
	w.idp = oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{w.agent, w.stranger, w.console},
		Users: []oidctest.User{idAlice, idBob, idCarol, idDave}})
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	yaml := fmt.Sprintf(`
auth:
  keys:
    - {name: agent-key, sha256: %s, tools: ["*"]}
    - {name: ops, sha256: %s, tools: ["*"], roles: [admin, observe]}
  oauth:
    issuer: %s
    audience: %s
    allow: [127.0.0.1]
    allow_http: true
    tools: ["*"]
    console: {client_id: toold-console, client_secret: console-secret}
%s
%s`, auth.Hash(oauthAgentKey), auth.Hash(oauthOpsKey), w.idp.Issuer, w.resource, oauth, rest)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	w.in = start(t, nil, "-config", cfg, "-workspace", workspace(t), "-listen", "127.0.0.1:"+strconv.Itoa(port))
	return w
}

// token is a signed-in user's access token for toold, with scopes.
func (w *oauthWorld) token(u oidctest.User, scopes ...string) string {
	return w.idp.SignIn(w.agent, u, append([]string{"openid"}, scopes...)...).AccessToken
}

// do sends a request with a bearer credential ("" for none).
func (w *oauthWorld) do(t *testing.T, method, path, bearer, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, w.in.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if path == "/mcp" {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := w.in.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestResourceServerHeaders: what MCP's authorization rules ask of toold
// as a resource server: the protected resource metadata at both paths; a
// 401 from /mcp and from REST naming it (and saying invalid_token when a
// token was refused); a token without a route's scope 403 naming the scope.
func TestResourceServerHeaders(t *testing.T) {
	w := newOAuthWorld(t, "")
	mdURL := strings.TrimSuffix(w.in.url, "/") + "/.well-known/oauth-protected-resource/mcp"
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		code, body := w.in.get(path)
		var md struct {
			Resource               string
			AuthorizationServers   []string `json:"authorization_servers"`
			ScopesSupported        []string `json:"scopes_supported"`
			BearerMethodsSupported []string `json:"bearer_methods_supported"`
		}
		if code != 200 || json.Unmarshal(body, &md) != nil || md.Resource != w.resource ||
			fmt.Sprint(md.AuthorizationServers) != "["+w.idp.Issuer+"]" ||
			fmt.Sprint(md.ScopesSupported) != "[toold:call toold:observe toold:admin toold:approve]" ||
			fmt.Sprint(md.BearerMethodsSupported) != "[header]" {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	plain := `Bearer resource_metadata="` + mdURL + `"`
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tt := range []struct {
		name, method, path, bearer, body string
		status                           int
		challenge                        string
	}{
		{"MCP without a token", "POST", "/mcp", "", mcpInit, 401, plain},
		{"REST without a token", "GET", "/tools", "", "", 401, plain},
		{"MCP with a bad token", "POST", "/mcp", "not-a-token", mcpInit, 401,
			plain + `, error="invalid_token", error_description="the bearer token is not valid: the token is not a JWT, and no issuer is configured to introspect opaque tokens"`},
		{"REST with another resource's token", "POST", "/tools/echo/execute", w.idp.ClientCredentials(w.stranger, "toold:call").AccessToken,
			`{"message":"hi"}`, 401, plain + `, error="invalid_token", error_description="the bearer token is not valid: the token was not issued for this resource (its aud does not name '` + w.resource + `')"`},
		{"REST without the call scope", "POST", "/tools/echo/execute", w.token(idAlice, "toold:observe"), `{"message":"hi"}`, 403,
			plain + `, error="insufficient_scope", error_description="the token does not grant the call role", scope="toold:call"`},
		{"MCP without the call scope", "POST", "/mcp", w.token(idAlice, "toold:observe"), mcpInit, 403,
			plain + `, error="insufficient_scope", error_description="the token does not grant the call role", scope="toold:call"`},
		{"the audit log without the admin scope", "GET", "/audit", w.token(idAlice, "toold:call"), "", 403,
			plain + `, error="insufficient_scope", error_description="the token does not grant the admin role", scope="toold:admin"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := w.do(t, tt.method, tt.path, tt.bearer, tt.body)
			got := strings.ReplaceAll(resp.Header.Get("WWW-Authenticate"), `?`, `'`)
			if resp.StatusCode != tt.status || got != tt.challenge {
				t.Errorf("%d %s\nWWW-Authenticate: %s\nwant             %s", resp.StatusCode, body, got, tt.challenge)
			}
			if tt.bearer != "" && strings.Contains(string(body), tt.bearer) {
				t.Error("the refusal quotes the token")
			}
		})
	}
	code, body := w.in.get(strings.TrimPrefix(mdURL, w.in.url)) // the challenge's URL is served
	if code != 200 || !strings.Contains(string(body), w.resource) {
		t.Errorf("the challenge's metadata URL: %d %s", code, body)
	}
}

// TestTokensOverRESTAndMCP: a signed-in user's token works over REST (the
// envelope names the principal) and for the official TypeScript MCP SDK
// client as a static bearer; keys keep working beside tokens.
func TestTokensOverRESTAndMCP(t *testing.T) {
	dir := interop(t)
	w := newOAuthWorldWith(t, "", mcpTestConfig)
	tok := w.token(idAlice, "toold:call")
	resp, body := w.do(t, "POST", "/tools/echo/execute", tok, `{"message":"hi"}`)
	var env struct {
		Success   bool
		Principal auth.Identity
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &env) != nil || !env.Success {
		t.Fatalf("REST with a token: %d %s", resp.StatusCode, body)
	}
	resp, body = w.do(t, "POST", "/tools/echo/execute", oauthAgentKey, `{"message":"hi"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("a key beside tokens: %d %s", resp.StatusCode, body)
	}
	s, _ := runTypeScriptClient(t, dir, "http", w.in.url+"/mcp", tok)
	checkTSSession(t, s, w.in.stderr.String)
	if !strings.Contains(w.in.stderr.String(), `"caller":"u-alice@`+w.idp.Issuer+`"`) {
		t.Error("toold's log does not name the token's subject as the caller")
	}
}

// TestTokenAttacksOverHTTP: forged and misdirected tokens are refused at
// the API as they are by the verifier (internal/oauth TestRefusals has the
// whole table), and a key rotated at the provider is accepted without a
// restart.
func TestTokenAttacksOverHTTP(t *testing.T) {
	w := newOAuthWorld(t, "")
	good := w.token(idAlice, "toold:call")
	parts := strings.Split(good, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	for name, tok := range map[string]string{
		"alg none":            none,
		"signature stripped":  parts[0] + "." + parts[1] + ".",
		"another resource's":  w.idp.ClientCredentials(w.stranger, "toold:call").AccessToken,
		"payload of another":  parts[0] + "." + strings.Split(w.token(idBob, "toold:call"), ".")[1] + "." + parts[2],
		"an API key mistyped": oauthAgentKey + "x",
	} {
		resp, body := w.do(t, "POST", "/tools/echo/execute", tok, `{"message":"hi"}`)
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: %d %s %s", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	w.idp.Rotate(true)
	rotated := w.token(idAlice, "toold:call")
	if resp, body := w.do(t, "POST", "/tools/echo/execute", rotated, `{"message":"hi"}`); resp.StatusCode != 200 {
		t.Errorf("a token of the rotated key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := w.do(t, "POST", "/tools/echo/execute", good, `{"message":"hi"}`); resp.StatusCode != 401 {
		t.Errorf("a token of the dropped key: %d", resp.StatusCode)
	}
}

// TestTokenNeverLeavesToold: a caller's token is toold's credential only.
// Calls with it reach an upstream MCP server over HTTP, an HTTP API tool
// and a consulted model API, all on one loopback server that keeps every
// request it gets: none carries the token, or any part of it, in a header
// or a body.
func TestTokenNeverLeavesToold(t *testing.T) {
	var seen syncBuffer
	peer := mcp.NewServer(&mcp.Implementation{Name: "peer", Version: "1"}, nil)
	// Read-only, as it says: a tool that claims nothing is destructive
	// and would wait for a person.
	mcp.AddTool(peer, &mcp.Tool{Name: "peek", Description: "Says hello.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
		})
	mcpH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return peer }, &mcp.StreamableHTTPOptions{Stateless: true})
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		fmt.Fprintf(&seen, "%s %s %v\n%s\n", r.Method, r.URL, r.Header, body)
		switch {
		case strings.HasPrefix(r.URL.Path, "/mcp"):
			mcpH.ServeHTTP(rw, r)
		case r.URL.Path == "/v1/models":
			io.WriteString(rw, `{"data":[{"id":"tiny"}]}`)
		case strings.HasPrefix(r.URL.Path, "/v1/"):
			io.WriteString(rw, `{"model":"tiny","choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
		default:
			io.WriteString(rw, `{"city":"Oslo"}`)
		}
	}))
	t.Cleanup(upstream.Close)
	w := newOAuthWorld(t, fmt.Sprintf(`
mcp:
  servers:
    - {name: peer, url: %[1]s/mcp, allow: [127.0.0.1], allow_http: true, required: true}
http:
  tools:
    - name: weather
      description: Current weather in a city.
      parameters: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}
      request: {url: "%[1]s/cities/{city}"}
      allow: [127.0.0.1]
      allow_http: true
consult:
  providers:
    local: {base_url: %[1]s/v1, model: tiny, allow: [127.0.0.1], allow_http: true}
`, upstream.URL))
	tok := w.token(idAlice, "toold:call")
	_, listing := w.do(t, "GET", "/tools", tok, "")
	var tools struct{ Tools []struct{ Name string } }
	json.Unmarshal(listing, &tools)
	peek := ""
	for _, tl := range tools.Tools {
		if strings.Contains(tl.Name, "peek") {
			peek = tl.Name
		}
	}
	for tool, args := range map[string]string{peek: `{}`, "weather": `{"city":"Oslo"}`,
		"consult": `{"prompt":"why?","provider":"local"}`} {
		if resp, body := w.do(t, "POST", "/tools/"+tool+"/execute", tok, args); resp.StatusCode != 200 || !strings.Contains(string(body), `"success":true`) {
			t.Fatalf("%s with a token: %d %s", tool, resp.StatusCode, body)
		}
	}
	got := seen.String()
	for _, part := range append(strings.Split(tok, "."), tok) {
		if strings.Contains(got, part) {
			t.Fatalf("a request toold made carries the caller's token:\n%s", got)
		}
	}
	for _, want := range []string{"/mcp", "/cities/Oslo", "/v1/chat/completions"} {
		if !strings.Contains(got, want) {
			t.Errorf("the upstream saw no request to %s:\n%s", want, got)
		}
	}
}
