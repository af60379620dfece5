package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/mcpserver"
)

// testPolicies are the policies of TestPolicyEveryWayIn.
const testPolicies = `
@id("everyday tools for everyone")
permit (principal, action in [toold::Action::"list", toold::Action::"call"], resource)
when { resource.read_only && resource.toolsets.contains("everyday") };

@id("no secrets")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"echo")
when { context.arguments has message && context.arguments.message like "*secret*" };

@id("approvers sleep")
permit (principal is toold::User, action in [toold::Action::"list", toold::Action::"call"], resource == toold::Tool::"sleep")
when { principal.groups.contains("approvers") };

@id("short sleeps")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"sleep")
when { context.arguments.ms > 1000 };

// No has: a call without max_matches cannot be decided by it, which
// refuses.
@id("few matches")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"grep")
when { context.arguments.max_matches > 50 };

@id("no sleeps from the console")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"sleep")
when { context.via == "console" };

@id("questions")
permit (principal, action in [toold::Action::"list", toold::Action::"call"], resource == toold::Tool::"request_user_input");

@id("questions are not resumed")
forbid (principal, action == toold::Action::"call", resource == toold::Tool::"request_user_input")
when { context.via == "execution" };

@id("ops observe everyday tools")
permit (principal == toold::Key::"ops", action == toold::Action::"observe", resource)
when { resource.toolsets.contains("everyday") };

@id("approvers approve")
permit (principal is toold::User, action == toold::Action::"approve", resource)
when { principal.groups.contains("approvers") };
`

// policyWorld is the OAuth world (alice and bob in approvers, carol in
// readers) with testPolicies.
func policyWorld(t *testing.T) *oauthWorld {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policies.cedar")
	if err := os.WriteFile(file, []byte(testPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	return newOAuthWorldWith(t, "", `tools:
  echo: {enabled: true}
  sleep: {enabled: true}
  request_user_input: {enabled: true}
  list_files: {confirmation: human}
  write_file: {enabled: true}
toolsets:
  everyday: {tools: [echo, read_file, grep, list_files]}
policy:
  files: [`+file+`]
`)
}

// TestPolicyEveryWayIn: the same decisions — an argument condition, a
// group, a forbid beating a permit, a missing argument failing closed —
// whichever way a call comes: REST, a batch, an async execution (Prefer:
// respond-async), MCP tools/call; a refusal is 403 policy_denied naming
// the policies that decided, never their text, and is in the audit log.
func TestPolicyEveryWayIn(t *testing.T) {
	w := policyWorld(t)
	alice, carol := w.token(idAlice, "toold:call"), w.token(idCarol, "toold:call")
	cases := []struct {
		name, who, tool, args string
		// ids are the policies named by the refusal; nil: allowed.
		ids []string
	}{
		{"an argument passes", alice, "echo", `{"message":"hi"}`, nil},
		{"an argument condition refuses", alice, "echo", `{"message":"my secret plan"}`, []string{"no secrets"}},
		{"a group permits", alice, "sleep", `{"ms":1}`, nil},
		{"outside the group nothing permits", carol, "sleep", `{"ms":1}`, []string{}},
		{"forbid beats permit", alice, "sleep", `{"ms":5000}`, []string{"short sleeps"}},
		{"a missing argument fails closed", alice, "grep", `{"pattern":"x"}`, []string{"few matches"}},
		{"the argument given", carol, "grep", `{"pattern":"x","max_matches":5}`, nil},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sessions := map[string]*mcp.ClientSession{}
	for _, who := range []string{alice, carol} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy-test", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.in.url + "/mcp", HTTPClient: &http.Client{Transport: apitest.Bearer(who, nil)}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		sessions[who] = cs
	}
	ways := map[string]func(who, tool, args string) (int, envelopeError){
		"rest": func(who, tool, args string) (int, envelopeError) {
			a := send(t, "POST", w.in.url+"/tools/"+tool+"/execute", args, bearer(who)...)
			return a.status, errorIn(t, a.body)
		},
		"batch": func(who, tool, args string) (int, envelopeError) {
			a := send(t, "POST", w.in.url+"/batch", `{"calls":[{"id":"c","tool":"`+tool+`","arguments":`+args+`}]}`, bearer(who)...)
			var b struct {
				Results []struct{ Envelope json.RawMessage }
			}
			if json.Unmarshal(a.body, &b); a.status != 200 || len(b.Results) != 1 {
				t.Fatalf("a batch: %d %s", a.status, a.body)
			}
			e := errorIn(t, b.Results[0].Envelope)
			return statusOf(e), e
		},
		"async": func(who, tool, args string) (int, envelopeError) {
			a := send(t, "POST", w.in.url+"/tools/"+tool+"/execute", args, append(bearer(who), "Prefer", "respond-async, wait=10")...)
			return a.status, errorIn(t, a.body)
		},
		"mcp": func(who, tool, args string) (int, envelopeError) {
			var m map[string]any
			_ = json.Unmarshal([]byte(args), &m)
			res, err := sessions[who].CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: m})
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			env, _ := json.Marshal(map[string]any{"error": res.Meta[mcpserver.MetaError]})
			e := errorIn(t, env)
			if res.IsError != (e.Code != "") {
				t.Errorf("tools/call: isError %v with %s", res.IsError, env)
			}
			return statusOf(e), e
		},
	}
	for way, call := range ways {
		for _, c := range cases {
			t.Run(way+"/"+c.name, func(t *testing.T) {
				status, e := call(c.who, c.tool, c.args)
				if c.ids == nil {
					if status != 200 || e.Code != "" {
						t.Errorf("refused: %d %+v", status, e)
					}
					return
				}
				if status != 403 || e.Code != "policy_denied" || !slices.Equal(e.policies(), c.ids) {
					t.Errorf("got %d %+v, want 403 policy_denied by %q", status, e, c.ids)
				}
				if strings.Contains(e.Message, "context.") || strings.Contains(e.Message, "when {") {
					t.Errorf("the refusal shows a policy's text: %s", e.Message)
				}
			})
		}
	}

	// The console's page is a way in of its own.
	a := send(t, "POST", w.in.url+"/tools/sleep/execute", `{"ms":1}`, append(bearer(alice), "Toold-Via", "console")...)
	if e := errorIn(t, a.body); a.status != 403 || !slices.Equal(e.policies(), []string{"no sleeps from the console"}) {
		t.Errorf("a call from the console: %d %s", a.status, a.body)
	}

	// A resumed call passes the gate again: the answer's step is an
	// execution's.
	a = send(t, "POST", w.in.url+"/tools/request_user_input/execute", `{"prompt":"which branch?"}`, bearer(alice)...)
	waiting := decodeWaiting(t, a)
	if a.status != 202 || waiting.Waiting == nil {
		t.Fatalf("the question: %d %s", a.status, a.body)
	}
	a = send(t, "POST", w.in.url+waiting.Waiting.Resume, `{"answer":"main"}`, append(bearer(alice), "Prefer", "wait=10")...)
	if e := errorIn(t, a.body); e.Code != "policy_denied" || !slices.Equal(e.policies(), []string{"questions are not resumed"}) {
		t.Errorf("the resumed step: %d %s", a.status, a.body)
	}

	// The activity stream shows the ops key the calls of the tools it may
	// observe: every one of sleep's came before the last call, of grep.
	send(t, "POST", w.in.url+"/tools/grep/execute", `{"pattern":"last","max_matches":1}`, bearer(alice)...)
	var seen []string
	sseEvents(t, w.in.url+"/events?last_event_id=1", func(_, data string) bool {
		var ev struct{ Tool string }
		json.Unmarshal([]byte(data), &ev)
		seen = append(seen, ev.Tool)
		return ev.Tool == "grep" && strings.Contains(data, `"type":"end"`)
	}, oauthOpsKey)
	if slices.Contains(seen, "sleep") || !slices.Contains(seen, "echo") {
		t.Errorf("the ops key observes %v", seen)
	}

	// The refusals are audited: the call's record, refused.
	w.in.waitAudit(t, oauthOpsKey, regexp.MustCompile(`"caller":"u-alice@[^"]+",.*"action":"execute","tool":"echo","args_sha256":"[0-9a-f]+","status":"rejected","error_type":"permission_error"`))
}

// TestPolicyListings: a tool every call of which the policy forbids is in
// no listing of the caller's — GET /tools, /tools/search, GET
// /tools/{name}, MCP tools/list — and one some call could pass is.
func TestPolicyListings(t *testing.T) {
	w := policyWorld(t)
	alice, carol := w.token(idAlice, "toold:call"), w.token(idCarol, "toold:call")
	for _, c := range []struct {
		who  string
		want bool
	}{{alice, true}, {carol, false}} {
		_, body := w.do(t, "GET", "/tools", c.who, "")
		var listing struct{ Tools []struct{ Name string } }
		json.Unmarshal(body, &listing)
		var names []string
		for _, tl := range listing.Tools {
			names = append(names, tl.Name)
		}
		if got := slices.Contains(names, "sleep"); got != c.want || !slices.Contains(names, "echo") || slices.Contains(names, "write_file") {
			t.Errorf("GET /tools shows %v (sleep: want %v)", names, c.want)
		}
		_, body = w.do(t, "GET", "/tools/search?q=wait+some+milliseconds&limit=50", c.who, "")
		if got := strings.Contains(string(body), `"name":"sleep"`) || strings.Contains(string(body), `"name": "sleep"`); got != c.want {
			t.Errorf("GET /tools/search shows sleep: %v, want %v: %s", got, c.want, body)
		}
		if resp, _ := w.do(t, "GET", "/tools/sleep", c.who, ""); (resp.StatusCode == 200) != c.want {
			t.Errorf("GET /tools/sleep: %d", resp.StatusCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy-test", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.in.url + "/mcp", HTTPClient: &http.Client{Transport: apitest.Bearer(c.who, nil)}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == "sleep" })
		if found != c.want {
			t.Errorf("tools/list shows sleep: %v, want %v", found, c.want)
		}
		cs.Close()
		cancel()
	}
}

// TestPolicyApprove: approve decides who may decide on which waiting
// call: an approver by role outside the policy's group is refused.
func TestPolicyApprove(t *testing.T) {
	w := policyWorld(t)
	a := send(t, "POST", w.in.url+"/tools/list_files/execute", `{}`, bearer(w.token(idAlice, "toold:call"))...)
	waiting := decodeWaiting(t, a)
	if a.status != 202 || waiting.Waiting == nil || waiting.Waiting.For != "approval" {
		t.Fatalf("a call waiting for approval: %d %s", a.status, a.body)
	}
	resp, body := w.do(t, "POST", "/approvals/"+waiting.ExecutionID, w.token(idCarol, "toold:approve"), `{"approve":true}`)
	if e := errorIn(t, body); resp.StatusCode != 403 || e.Code != "policy_denied" {
		t.Errorf("an approver outside the group: %d %s", resp.StatusCode, body)
	}
	if resp, body := w.do(t, "POST", "/approvals/"+waiting.ExecutionID, w.token(idBob, "toold:approve"), `{"approve":true}`); resp.StatusCode != 200 {
		t.Errorf("an approver in the group: %d %s", resp.StatusCode, body)
	}
}

// TestBadPolicyRefusesToStart: a policy that does not parse, or does not
// fit the schema, stops toold at start with its file, line and column.
func TestBadPolicyRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.cedar")
	os.WriteFile(file, []byte("permit (principal, action, resource);\n\n  @id(\"typo\")\n  permit (principal, action, resource) when { resource.read_onyl };\n"), 0o600)
	cfg := filepath.Join(dir, "toold.yaml")
	os.WriteFile(cfg, []byte("policy:\n  files: ["+file+"]\n"), 0o600)
	var stdout, stderr strings.Builder
	err := run(context.Background(), []string{"-config", cfg, "-workspace", workspace(t), "-state-dir", t.TempDir(), "-listen", "127.0.0.1:0"},
		func(string) (string, bool) { return "", false }, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(stderr.String(), file+":3:3") || !strings.Contains(stderr.String(), "read_onyl") {
		t.Errorf("toold started, or did not say where: %v\n%s", err, stderr.String())
	}
}

// envelopeError is what the tests read of an envelope's error.
type envelopeError struct {
	Type, Code, Message string
}

// policies are the ids a policy_denied message names.
func (e envelopeError) policies() []string {
	_, list, ok := strings.Cut(e.Message, "(decided by ")
	if !ok {
		return []string{}
	}
	var out []string
	for _, q := range strings.Split(strings.TrimSuffix(list, ")"), ", ") {
		out = append(out, strings.Trim(q, `"`))
	}
	return out
}

func errorIn(t *testing.T, body []byte) envelopeError {
	t.Helper()
	var env struct{ Error *envelopeError }
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not an envelope: %s", body)
	}
	if env.Error == nil {
		return envelopeError{}
	}
	return *env.Error
}

// statusOf is the HTTP status REST would answer an envelope's error with.
func statusOf(e envelopeError) int {
	switch e.Type {
	case "":
		return 200
	case "permission_error", "security_error":
		return 403
	}
	return 400
}

// TestPolicyCommands: toold policy schema prints the schema; check
// reports a bad policy at its place and exits 1; test runs a table and
// exits 1 when a decision is not the one expected.
func TestPolicyCommands(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.cedar", `@id("read-only") permit (principal, action == toold::Action::"call", resource) when { resource.read_only };`)
	bad := write("bad.cedar", "\n\npermit (principal, action, resource) when { resource.kidn == 1 };")
	table := write("table.yaml", `tests:
  - name: a key reads
    principal: {key: ci}
    tool: {name: read_file, kind: direct, read_only: true}
    expect: allow
  - name: a key writes
    principal: {key: ci}
    tool: {name: write_file, kind: direct}
    expect: allow
`)
	env := func(string) (string, bool) { return "", false }
	for _, c := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"policy", "schema"}, 0, `action "call" appliesTo`, ""},
		{[]string{"policy", "check", good}, 0, "1 policies in 1 files: ok", ""},
		{[]string{"policy", "check", good, bad}, 1, "", bad + ":3:1"},
		{[]string{"policy", "test", "-policy", good, table}, 1, "FAIL a key writes: deny (no policy applies), want allow", ""},
		{[]string{"policy", "frobnicate"}, 2, "", "usage: toold policy"},
	} {
		var stdout, stderr strings.Builder
		err := run(context.Background(), c.args, env, strings.NewReader(""), &stdout, &stderr)
		code := 0
		if ec, ok := err.(exitCode); ok {
			code = int(ec)
		} else if err != nil {
			code = -1
		}
		if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
			t.Errorf("toold %v: exit %d (want %d)\nstdout: %s\nstderr: %s", c.args, code, c.code, stdout.String(), stderr.String())
		}
	}
}
