package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/oauth/oidctest"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// Acting as the user, end to end: a real OpenID Provider is the
// authorization server of an upstream that requires OAuth — toold itself
// with auth.oauth — reached by a second toold both as an HTTP API tool
// (auth.oauth with a client_id) and as a hosted MCP server over Streamable
// HTTP (auth.oauth discovered from its protected resource metadata, the
// client registered dynamically). Two people behind the second toold, each
// with their own API key, connect through the consent pages as a browser
// would, and the upstream sees each as themselves.

const (
	aliceKey = "toold_alice_key_for_the_acting_tests_0"
	bobKey   = "toold_bob_key_for_the_acting_tests_000"
	opsKey   = "toold_ops_key_for_the_acting_tests_000"
)

type actingWorld struct {
	idp      *oidctest.Provider
	up       *instance // the upstream toold, a resource server of idp
	resource string
	upClient oidctest.Client
	cfg      string // the acting toold's configuration file
	stateDir string
	ws       string
	key      string
}

func newActingWorld(t *testing.T) *actingWorld {
	t.Helper()
	port := statetest.FreePort(t)
	w := &actingWorld{resource: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", stateDir: t.TempDir(), ws: workspace(t),
		key: credentials.NewKey()}
	w.upClient = oidctest.Client{ID: "toold-up", RedirectURIs: []string{"http://127.0.0.1:*/connections/callback"}, ResourceAudience: true}
	w.idp = oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{w.upClient}, Users: []oidctest.User{idAlice, idBob}})
	upCfg := filepath.Join(t.TempDir(), "up.yaml")
	writeFile(t, upCfg, fmt.Sprintf(`
auth:
  keys: [{name: ops, sha256: %s, tools: ["*"], roles: [admin, observe]}]
  oauth: {issuer: %s, audience: %s, allow: [127.0.0.1], allow_http: true, tools: ["*"]}
tools:
  echo: {enabled: true}
server: {drain_grace: 1s}
`, auth.Hash(opsKey), w.idp.Issuer, w.resource))
	w.up = start(t, nil, "-config", upCfg, "-workspace", w.ws, "-listen", "127.0.0.1:"+strconv.Itoa(port))
	w.cfg = filepath.Join(t.TempDir(), "toold.yaml")
	writeFile(t, w.cfg, fmt.Sprintf(`
auth:
  keys:
    - {name: alice, sha256: %s, tools: ["*"]}
    - {name: bob, sha256: %s, tools: ["*"]}
    - {name: ops, sha256: %s, tools: ["*"], roles: [call, admin]}
credentials:
  key: ${TOOLD_CREDENTIALS_KEY}
server: {drain_grace: 1s}
http:
  tools:
    - name: up_echo
      description: Echo, on the upstream, as the caller.
      parameters: {type: object, properties: {message: {type: string}}, required: [message]}
      request: {method: POST, url: "%s", body: {message: "{message}"}}
      auth:
        oauth: {per_user: true, issuer: "%s", client_id: toold-up, resource: "%s", scopes: ["toold:call"]}
      allow: [127.0.0.1]
      allow_http: true
mcp:
  servers:
    - name: up
      url: %s
      allow: [127.0.0.1]
      allow_http: true
      auth: {oauth: {per_user: true}}
`, auth.Hash(aliceKey), auth.Hash(bobKey), auth.Hash(opsKey), strings.TrimSuffix(w.resource, "/mcp")+"/tools/echo/execute",
		w.idp.Issuer, w.resource, w.resource))
	return w
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startActing starts the acting toold on its state directory with key.
func (w *actingWorld) startActing(t *testing.T, key string) *instance {
	t.Helper()
	return startArgs(t, map[string]string{"TOOLD_CREDENTIALS_KEY": key}, "-state-dir", w.stateDir, "-config", w.cfg, "-workspace", w.ws)
}

// as sends a request with a bearer credential and returns the status and
// the decoded JSON (nil for none).
func as(t *testing.T, in *instance, bearer, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, in.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := in.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v
}

var flowField = regexp.MustCompile(`name="flow" value="([^"]+)"`)

// consent connects as a person's browser would: the consent page the
// authorize_url opens (no toold credentials), its button, the provider's
// login, and back to toold's callback. It returns the callback page.
func consent(t *testing.T, idp *oidctest.Provider, u oidctest.User, authorizeURL string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: apitest.Checker(t, http.DefaultTransport), Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := flowField.FindSubmatch(page)
	if resp.StatusCode != 200 || m == nil || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("the consent page: %d %s", resp.StatusCode, page)
	}
	start, _ := url.Parse(authorizeURL)
	resp, err = browser.PostForm(start.Scheme+"://"+start.Host+start.Path, url.Values{"flow": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	to, err := resp.Location()
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("beginning: %d %v", resp.StatusCode, err)
	}
	back := idp.Authorize(u, to.String())
	resp, err = browser.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	done, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(done, []byte(`id="done"`)) {
		t.Fatalf("the callback: %d %s", resp.StatusCode, done)
	}
	return string(done)
}

func envError(env map[string]any) map[string]any {
	e, _ := env["error"].(map[string]any)
	return e
}

// upstreamSubject is the subject the upstream's envelope (the HTTP tool's
// result) names.
func upstreamSubject(env map[string]any) string {
	data, _ := env["data"].(map[string]any)
	p, _ := data["principal"].(map[string]any)
	s, _ := p["subject"].(string)
	return s
}

// TestActingAsTheUser: the consent step over REST, two principals seen
// upstream as two identities (an HTTP API tool and a hosted MCP server),
// the caller's connections listed; a restart with the same key and store
// keeps them; the store's files hold no token in clear; a wrong key
// refuses to start; a disconnection revokes at the provider; the audit log
// names credentials, never their values.
func TestActingAsTheUser(t *testing.T) {
	w := newActingWorld(t)
	in := w.startActing(t, w.key)

	// Not connected: 403 authorization_required naming where to go.
	code, env := as(t, in, aliceKey, "POST", "/tools/up_echo/execute", `{"message":"hi"}`)
	e := envError(env)
	authorize, _ := e["authorize_url"].(string)
	if code != 403 || e["code"] != "authorization_required" || e["upstream"] != "up_echo" || !strings.HasPrefix(authorize, in.url+"/connections/start?flow=") {
		t.Fatalf("alice before connecting: %d %v", code, env)
	}
	// Over MCP: a client that takes URL elicitations gets -32042 naming
	// the page; one that does not, the tool error with the URL in its text.
	if e := mcpConsent(t, in, aliceKey, true); e["code"] != float64(-32042) || !strings.Contains(mustJSON(e), `"mode":"url"`) ||
		!strings.Contains(mustJSON(e), in.url+"/connections/start?flow=") {
		t.Errorf("an MCP client with URL elicitation: %v", e)
	}
	if r := mcpConsent(t, in, aliceKey, false); r["isError"] != true || !strings.Contains(mustJSON(r), "Authorize at: "+in.url+"/connections/start?flow=") {
		t.Errorf("an MCP client without it: %v", r)
	}
	if page := consent(t, w.idp, idAlice, authorize); !strings.Contains(page, "alice") {
		t.Errorf("the callback page does not name alice: %s", page)
	}
	code, env = as(t, in, aliceKey, "POST", "/tools/up_echo/execute", `{"message":"hi"}`)
	if code != 200 || upstreamSubject(env) != idAlice.ID {
		t.Fatalf("alice after connecting: %d %v", code, env)
	}
	_, env = as(t, in, bobKey, "POST", "/tools/up_echo/execute", `{"message":"hi"}`)
	consent(t, w.idp, idBob, envError(env)["authorize_url"].(string))
	if code, env = as(t, in, bobKey, "POST", "/tools/up_echo/execute", `{"message":"hi"}`); code != 200 || upstreamSubject(env) != idBob.ID {
		t.Fatalf("bob after connecting: %d %v", code, env)
	}

	// The MCP server: listed once someone connects it (the client
	// registered dynamically), each caller over a session of their own.
	if code, body := in.get("/tools"); code != 401 && bytes.Contains(body, []byte("up.echo")) {
		t.Fatalf("the server's tools are listed before anyone connected it")
	}
	req, _ := http.NewRequest("GET", in.url+"/connections/up/authorize", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("GET /connections/up/authorize: %v %v", resp, err)
	}
	resp.Body.Close()
	consent(t, w.idp, idAlice, resp.Header.Get("Location"))
	waitFor(t, 15*time.Second, "the MCP server's tools to be listed", func() bool {
		_, body := as(t, in, aliceKey, "GET", "/tools", "")
		return strings.Contains(mustJSON(body), `"up.echo"`)
	})
	if code, env = as(t, in, aliceKey, "POST", "/tools/up.echo/execute", `{"message":"over mcp"}`); code != 200 {
		t.Fatalf("alice over MCP: %d %v", code, env)
	}
	code, env = as(t, in, bobKey, "POST", "/tools/up.echo/execute", `{"message":"over mcp"}`)
	if code != 403 || envError(env)["code"] != "authorization_required" || envError(env)["upstream"] != "up" {
		t.Fatalf("bob over MCP before connecting it: %d %v", code, env)
	}
	consent(t, w.idp, idBob, envError(env)["authorize_url"].(string))
	if code, env = as(t, in, bobKey, "POST", "/tools/up.echo/execute", `{"message":"over mcp"}`); code != 200 {
		t.Fatalf("bob over MCP: %d %v", code, env)
	}
	waitFor(t, 10*time.Second, "the upstream's audit log to show two echo calls of each subject", func() bool {
		got := w.upstreamCalls(t)
		return got[idAlice.ID] == 2 && got[idBob.ID] == 2
	})

	code, env = as(t, in, aliceKey, "GET", "/connections", "")
	if list := mustJSON(env); code != 200 || strings.Count(list, `"connected":true`) != 2 || !strings.Contains(list, `"expires_at"`) {
		t.Errorf("alice's connections: %d %s", code, list)
	}

	// A restart with the same key and store: still connected. Between,
	// the store is read with the key: no file holds a token in clear.
	in.shutdown()
	tok := w.storedTokens(t, "key:alice", "up_echo")
	grepDir(t, w.stateDir, tok.AccessToken, tok.RefreshToken)
	if err := w.startFails(t, credentials.NewKey()); !strings.Contains(err, "credentials.key does not open") {
		t.Errorf("a wrong key: %s", err)
	}
	in = w.startActing(t, w.key)
	if code, env = as(t, in, aliceKey, "POST", "/tools/up_echo/execute", `{"message":"again"}`); code != 200 || upstreamSubject(env) != idAlice.ID {
		t.Fatalf("alice after a restart: %d %v", code, env)
	}

	// A disconnection revokes at the provider and forgets.
	if code, _ := as(t, in, aliceKey, "DELETE", "/connections/up_echo", ""); code != 204 {
		t.Fatalf("DELETE /connections/up_echo: %d", code)
	}
	if err := w.idp.Refresh(w.upClient, tok.RefreshToken); err == nil {
		t.Error("alice's refresh token still works at the provider after she disconnected")
	}
	if code, env = as(t, in, aliceKey, "POST", "/tools/up_echo/execute", `{"message":"hi"}`); code != 403 || envError(env)["code"] != "authorization_required" {
		t.Errorf("alice after disconnecting: %d %v", code, env)
	}
	audit := in.waitAudit(t, opsKey, regexp.MustCompile(`credential_remove`))
	for _, want := range []string{"credential_connect", "credential_use", "credential_remove", "oauth:up_echo"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
	if strings.Contains(audit, tok.AccessToken) || strings.Contains(audit, tok.RefreshToken) {
		t.Error("the audit log holds a token")
	}
}

// mcpConsent calls up_echo over MCP as the key's holder, from a client
// that declares URL elicitation (url) or not, and returns the JSON-RPC
// error (url) or the result.
func mcpConsent(t *testing.T, in *instance, key string, url bool) map[string]any {
	t.Helper()
	caps := `{}`
	if url {
		caps = `{"elicitation":{"url":{}}}`
	}
	post := func(session, body string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest("POST", in.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := in.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if i := bytes.Index(b, []byte("data: ")); i >= 0 { // an event stream of one message
			b = b[i+6:]
		}
		var v map[string]any
		_ = json.Unmarshal(bytes.TrimSpace(b), &v)
		return resp, v
	}
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+
		`,"clientInfo":{"name":"t","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	_, v := post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up_echo","arguments":{"message":"hi"}}}`)
	if url {
		e, _ := v["error"].(map[string]any)
		return e
	}
	r, _ := v["result"].(map[string]any)
	return r
}

// upstreamCalls counts the upstream's audited echo calls by subject.
func (w *actingWorld) upstreamCalls(t *testing.T) map[string]int {
	t.Helper()
	body := w.up.waitAudit(t, opsKey, regexp.MustCompile(`"tool":"echo"`))
	out := map[string]int{}
	for _, sub := range []string{idAlice.ID, idBob.ID} {
		out[sub] = len(regexp.MustCompile(`"subject":"`+sub+`"[^{}]*\}[^{}]*"action":"execute"[^{}]*"tool":"echo"`).FindAllString(body, -1))
	}
	return out
}

// storedTokens reads a principal's tokens from the stopped toold's store,
// with the key.
func (w *actingWorld) storedTokens(t *testing.T, principal, connection string) *credentials.Token {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: w.stateDir, Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kr, _ := credentials.NewKeyring(w.key, nil)
	v, err := credentials.New(context.Background(), credentials.Options{KV: st.Credentials, NotFound: state.ErrNotFound,
		Conflict: state.ErrConflict, Keys: kr})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := v.Tokens(context.Background(), principal, connection)
	if err != nil || tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("%s's tokens of %s: %+v %v", principal, connection, tok, err)
	}
	return tok
}

// startFails starts the acting toold with key and returns why it stopped.
func (w *actingWorld) startFails(t *testing.T, key string) string {
	t.Helper()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lookup := func(k string) (string, bool) {
		if k == "TOOLD_CREDENTIALS_KEY" {
			return key, true
		}
		return "", false
	}
	err := run(ctx, []string{"-listen", "127.0.0.1:0", "-admin-listen", "off", "-state-dir", w.stateDir, "-config", w.cfg, "-workspace", w.ws},
		lookup, strings.NewReader(""), &stdout, &stderr)
	if err == nil {
		t.Fatal("toold started")
	}
	return err.Error() + stderr.String()
}

// grepDir fails if a file under dir holds one of the values.
func grepDir(t *testing.T, dir string, values ...string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a token in clear", p)
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("grepping the store: %d files, %v", n, err)
	}
}

// waitFor polls a condition the test cannot be told of (a background
// listing), bounded.
func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestConsoleConnections: the console's Connections page, in headless
// Chromium, as a person uses it with their key: each connection with its
// status and a Connect link to their consent page; a credential set with
// the form is listed by name and never shown again; a connection made is
// shown with its scopes, and Disconnect ends it.
func TestConsoleConnections(t *testing.T) {
	w := newActingWorld(t)
	in := w.startActing(t, w.key)
	b := newBrowser(t, in.url)
	b.open("connections", aliceKey)
	card := `article.connection[data-name="up_echo"]`
	b.waitText(card, "not connected")
	href := eval[string](b, `document.querySelector('`+card+` a.connect').href`)
	if !strings.HasPrefix(href, in.url+"/connections/start?flow=") {
		t.Fatalf("the Connect link: %q", href)
	}
	const value = "jira-secret-value-0123456789"
	b.do(chromedp.SendKeys(chromedp.CSS("#credential-name"), "jira"), chromedp.SendKeys(chromedp.CSS("#credential-value"), value),
		chromedp.Click(chromedp.CSS(`#credential-form button[type="submit"]`)))
	b.waitText("#credentials-list", "jira")
	if page := eval[string](b, `document.body.innerText + document.getElementById('credential-value').value`); strings.Contains(page, value) {
		t.Error("the page shows the credential's value after saving it")
	}
	if code, env := as(t, in, aliceKey, "GET", "/credentials", ""); code != 200 || !strings.Contains(mustJSON(env), `"name":"jira"`) || strings.Contains(mustJSON(env), value) {
		t.Errorf("GET /credentials: %d %v", code, env)
	}
	consent(t, w.idp, idAlice, href)
	b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#view-connections")))
	b.waitText(card, "toold:call")
	b.shot("connections")
	b.do(chromedp.Click(chromedp.CSS(card + " button.disconnect")))
	b.waitText("#connections-status", "Disconnected up_echo")
	b.waitText(card, "not connected")
}
