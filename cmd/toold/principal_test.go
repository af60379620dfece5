package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
)

// The principal on every call, roles and tools from claims, and the
// per-principal limits, against the real provider (see oauth_test.go).

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
	wantAlice := auth.Identity{Kind: auth.KindToken, Name: "u-alice@" + w.idp.Issuer, Issuer: w.idp.Issuer, Subject: "u-alice", Client: "agent",
		Groups: idAlice.Groups} // the groups claim, which policies read
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
	if !strings.Contains(string(body), `"principal":{"kind":"token","name":"u-alice@`+w.idp.Issuer+`","issuer":"`+w.idp.Issuer+`","subject":"u-alice","client":"agent","groups":["approvers"]}`) {
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
      - {claim: scope, value: "toold:admin", tools: ["*"]}`, "tools:\n  echo: {enabled: true}\n")
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
	hc := &http.Client{Transport: apitest.Bearer(carol, nil)}
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
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"paths": []string{"hello.txt"}}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call for a reader: %v %+v", err, res)
	}
	meta, _ := json.Marshal(res.Meta["toold/envelope"])
	var bookkeeping struct{ Principal auth.Identity }
	if json.Unmarshal(meta, &bookkeeping); bookkeeping.Principal.Subject != "u-carol" || bookkeeping.Principal.Client != "agent" {
		t.Errorf("the result's _meta does not name the principal: %s", meta)
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

// TestPerPrincipalLimits: two users behind one agent backend (one client)
// are bounded each on their own: one who holds their share of a tool's
// bulkhead, or spends their rate, is refused 429 with Retry-After and a
// code and message naming the bound, while the other goes on.
func TestPerPrincipalLimits(t *testing.T) {
	// A rate slow enough that no call is refunded while the test runs.
	w := newOAuthWorldWith(t, "  limits: {rate: 0.01, burst: 3, share: 0.5}",
		"tools:\n  echo: {enabled: true}\n  sleep: {enabled: true, limits: {max_in_flight: 2, max_queue: 0}}\n")
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
	if after, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || after < 50 || after > 100 ||
		!strings.Contains(string(body), `"code":"principal_rate"`) ||
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
