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
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

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
	return newOAuthWorldWith(t, "", extra)
}

// newOAuthWorldWith adds oauth to auth.oauth's keys and extra to the
// tools section.
func newOAuthWorldWith(t *testing.T, oauth, extra string) *oauthWorld {
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
tools:
  echo: {enabled: true}
%s`, auth.Hash(oauthAgentKey), auth.Hash(oauthOpsKey), w.idp.Issuer, w.resource, oauth, extra)
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
	w := newOAuthWorld(t, `
  sleep: {enabled: true}
commands:
  tools:
    - name: count
      description: Counts to three, a line at a time.
      argv: [sh, -c, "echo one; sleep 0.1; echo two; sleep 0.1; echo three"]
`)
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
	mcp.AddTool(peer, &mcp.Tool{Name: "peek", Description: "Says hello."},
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

// TestPrincipalOnEveryRecord: a token's subject, issuer and acting client
// are on every trace of its calls: the envelope the caller gets (sync and
// async), the activity stream, the approval an approver lists, the
// approval's decision, and the audit log; an agent backend acting for a
// user by token exchange is named as the actor. Self-approval is judged
// by subject: the caller's own token (any client) cannot approve its call,
// another subject's can.
func TestPrincipalOnEveryRecord(t *testing.T) {
	w := newOAuthWorld(t, "  request_user_input: {enabled: true}\n  sleep: {enabled: true, confirmation: human}\n")
	if resp, _ := w.do(t, "POST", "/tools/echo/execute", oauthAgentKey, `{"message":"first"}`); resp.StatusCode != 200 {
		t.Fatal("a warm-up call failed")
	}
	alice := w.token(idAlice, "toold:call", "toold:approve")
	bob := w.token(idBob, "toold:approve")
	resp, body := w.do(t, "POST", "/tools/echo/execute", alice, `{"message":"hi"}`)
	var env struct {
		Status      string
		ExecutionID string `json:"execution_id"`
		Principal   auth.Identity
	}
	json.Unmarshal(body, &env)
	wantAlice := auth.Identity{Kind: auth.KindToken, Name: "u-alice@" + w.idp.Issuer, Issuer: w.idp.Issuer, Subject: "u-alice", Client: "agent"}
	if resp.StatusCode != 200 || !reflect.DeepEqual(env.Principal, wantAlice) {
		t.Fatalf("the envelope's principal: %d %s", resp.StatusCode, body)
	}

	// Async: the record keeps the principal; the worker holds the call
	// to the token's tools.
	req, _ := http.NewRequest("POST", w.in.url+"/tools/echo/execute", strings.NewReader(`{"message":"later"}`))
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async, wait=5")
	r2, err := w.in.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	env.Principal = auth.Identity{}
	json.Unmarshal(b2, &env)
	if env.Status != "success" || !reflect.DeepEqual(env.Principal, wantAlice) {
		t.Errorf("an async call of a token: %d %s", r2.StatusCode, b2)
	}

	// Delegation: the backend's exchange names it as actor.
	backend := w.idp.ClientCredentials(w.agent, "toold:call").AccessToken
	delegated := w.idp.Exchange(w.agent, w.token(idAlice, "toold:call"), backend, w.resource, "toold:call").AccessToken
	_, body = w.do(t, "POST", "/tools/echo/execute", delegated, `{"message":"for alice"}`)
	env.Principal = auth.Identity{}
	json.Unmarshal(body, &env)
	if env.Principal.Subject != "u-alice" || env.Principal.Actor != "agent" {
		t.Errorf("a delegated call's principal: %s", body)
	}

	// An approval: listed with the caller's principal; refused to the
	// caller's own sign-in, decided by another subject.
	resp, body = w.do(t, "POST", "/tools/sleep/execute", alice, `{"ms":1}`)
	json.Unmarshal(body, &env)
	if resp.StatusCode != 202 || env.ExecutionID == "" {
		t.Fatalf("a call waiting for approval: %d %s", resp.StatusCode, body)
	}
	_, body = w.do(t, "GET", "/approvals", bob, "")
	if !strings.Contains(string(body), `"principal":{"kind":"token","name":"u-alice@`+w.idp.Issuer+`","issuer":"`+w.idp.Issuer+`","subject":"u-alice","client":"agent"}`) {
		t.Errorf("GET /approvals does not name the caller's principal: %s", body)
	}
	aliceElsewhere := w.idp.SignIn(w.console, idAlice, "openid", "toold:approve").AccessToken // another client, same subject
	for _, tok := range []string{alice, aliceElsewhere} {
		resp, body = w.do(t, "POST", "/approvals/"+env.ExecutionID, tok, `{"approve":true}`)
		if resp.StatusCode != 403 || !strings.Contains(string(body), `"code":"self_approval"`) || !strings.Contains(string(body), `the subject \"u-alice\"`) {
			t.Errorf("the caller approving its own call: %d %s", resp.StatusCode, body)
		}
	}
	if resp, body = w.do(t, "POST", "/approvals/"+env.ExecutionID, bob, `{"approve":true,"reason":"fine"}`); resp.StatusCode != 200 {
		t.Fatalf("another subject approving: %d %s", resp.StatusCode, body)
	}

	// The activity stream and the audit log name the subjects.
	found := false
	sseEvents(t, w.in.url+"/events?tool=echo&last_event_id=1", func(_, data string) bool {
		found = strings.Contains(data, `"type":"end"`) && strings.Contains(data, `"subject":"u-alice"`) && strings.Contains(data, `"client":"agent"`)
		return found
	}, oauthOpsKey)
	if !found {
		t.Error("the activity stream does not name the token's subject")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, audit := w.do(t, "GET", "/audit", oauthOpsKey, "")
		a := string(audit)
		if strings.Contains(a, `"caller":"u-alice@`+w.idp.Issuer+`","principal":{"kind":"token","name":"u-alice@`+w.idp.Issuer+`","issuer":"`+w.idp.Issuer+`","subject":"u-alice","client":"agent"},"action":"execute"`) &&
			strings.Contains(a, `"subject":"u-bob","client":"agent"},"action":"approve"`) &&
			strings.Contains(a, `"actor":"agent"},"action":"execute"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log does not name the subjects:\n%s", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClaimsGiveRolesAndTools: a group claim grants a role through the
// mapping, and tool_claims narrow a subject's tools: every listing (REST
// and MCP's tools/list) shows only those, and a call to another is refused
// as for a key.
func TestClaimsGiveRolesAndTools(t *testing.T) {
	w := newOAuthWorldWith(t, `    roles_claim: groups
    roles: {approve: [toold:approve, approvers]}
    tool_claims:
      - {claim: groups, value: readers, tools: [read_file, grep]}
      - {claim: scope, value: "toold:admin", tools: ["*"]}`, "")
	carol := w.token(idCarol, "toold:call")
	_, listing := w.do(t, "GET", "/tools", carol, "")
	var tools struct{ Tools []struct{ Name string } }
	json.Unmarshal(listing, &tools)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[grep read_file]" {
		t.Errorf("GET /tools for a reader: %v", names)
	}
	if resp, body := w.do(t, "POST", "/tools/echo/execute", carol, `{"message":"hi"}`); resp.StatusCode != 403 || !strings.Contains(string(body), `"code":"forbidden"`) {
		t.Errorf("a reader calling echo: %d %s", resp.StatusCode, body)
	}
	if resp, body := w.do(t, "POST", "/tools/read_file/execute", carol, `{"paths":["hello.txt"]}`); resp.StatusCode != 200 {
		t.Errorf("a reader reading: %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearerTransport{carol}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "claims-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.in.url + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	names = nil
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if err != nil || fmt.Sprint(names) != "[grep read_file]" {
		t.Errorf("tools/list for a reader: %v %v", names, err)
	}
	dave := w.token(idDave, "toold:call") // approvers, no toold:approve scope: the group grants the role
	if resp, body := w.do(t, "GET", "/approvals", dave, ""); resp.StatusCode != 200 {
		t.Errorf("an approver by group: %d %s", resp.StatusCode, body)
	}
	if resp, body := w.do(t, "POST", "/tools/read_file/execute", dave, `{"paths":["hello.txt"]}`); resp.StatusCode != 403 {
		t.Errorf("a subject no tool_claims entry matches: %d %s", resp.StatusCode, body)
	}
	if resp, body := w.do(t, "POST", "/tools/echo/execute", w.token(idDave, "toold:call", "toold:admin"), `{"message":"hi"}`); resp.StatusCode != 200 {
		t.Errorf("the admin scope's tools: %d %s", resp.StatusCode, body)
	}
}

// bearerTransport sends a bearer token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestPerPrincipalLimits: two users behind one agent backend (one client)
// are bounded each on their own: one who holds their share of a tool's
// bulkhead, or spends their rate, is refused 429 with Retry-After and a
// code and message naming the bound, while the other goes on.
func TestPerPrincipalLimits(t *testing.T) {
	w := newOAuthWorldWith(t, "  limits: {rate: 0.5, burst: 3, share: 0.5}",
		"  sleep: {enabled: true, limits: {max_in_flight: 2, max_queue: 0}}\n")
	alice, bob := w.token(idAlice, "toold:call"), w.token(idBob, "toold:call")
	long := make(chan int, 1)
	go func() {
		resp, _ := w.do(t, "POST", "/tools/sleep/execute", alice, `{"ms":3000}`)
		long <- resp.StatusCode
	}()
	for deadline := time.Now().Add(10 * time.Second); w.in.gauge(t, `toold_tool_in_flight{tool="sleep"}`) != "1"; {
		if time.Now().After(deadline) {
			t.Fatal("alice's sleep never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, body := w.do(t, "POST", "/tools/sleep/execute", alice, `{"ms":1}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"principal_share"`) ||
		!strings.Contains(string(body), "auth.limits.share") {
		t.Errorf("alice past her share: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp, body := w.do(t, "POST", "/tools/sleep/execute", bob, `{"ms":1}`); resp.StatusCode != 200 {
		t.Errorf("bob beside her: %d %s", resp.StatusCode, body)
	}
	if resp, body := w.do(t, "POST", "/tools/echo/execute", alice, `{"message":"third"}`); resp.StatusCode != 200 {
		t.Errorf("alice within her rate: %d %s", resp.StatusCode, body)
	}
	resp, body = w.do(t, "POST", "/tools/echo/execute", alice, `{"message":"fourth"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(body), `"code":"principal_rate"`) ||
		!strings.Contains(string(body), "auth.limits.rate") {
		t.Errorf("alice past her rate: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp, body := w.do(t, "POST", "/tools/echo/execute", bob, `{"message":"hi"}`); resp.StatusCode != 200 {
		t.Errorf("bob beside her: %d %s", resp.StatusCode, body)
	}
	if code := <-long; code != 200 {
		t.Errorf("alice's long call: %d", code)
	}
}
