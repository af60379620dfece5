package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// signIn signs a person in to the console through the issuer, as they
// would: the console's sign-in link, the provider's own login page, and
// back.
func (b *browser) signIn(user, password string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+"/console/#approvals"), chromedp.WaitVisible(chromedp.CSS("a.sign-in")),
		chromedp.Click(chromedp.CSS("a.sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#username")), chromedp.SendKeys(chromedp.CSS("#username"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password), chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#sign-out")))
}

// TestConsoleSignIn: a person signs in to the console through the real
// provider in headless Chromium (authorization code with PKCE); the session
// is a cookie no script can read and no other site's page sends, and a
// decision without its CSRF token is refused. The caller's own sign-in is
// shown the call its agent made, with the caller's subject and the agent
// client, and cannot approve it; another subject signs in and approves it,
// and the audit log names both sign-ins and the approver.
func TestConsoleSignIn(t *testing.T) {
	w := newOAuthWorld(t, "  sleep: {enabled: true, confirmation: human}\n")
	resp, body := w.do(t, "POST", "/tools/sleep/execute", w.token(idAlice, "toold:call"), `{"ms":1}`)
	var env struct {
		ExecutionID string `json:"execution_id"`
		Status      string
	}
	if json.Unmarshal(body, &env); resp.StatusCode != 202 || env.ExecutionID == "" {
		t.Fatalf("alice's call waiting for approval: %d %s", resp.StatusCode, body)
	}
	card := `article.approval[data-id="` + env.ExecutionID + `"]`
	b := newBrowser(t, w.in.url)

	b.signIn("alice", "alice-pw")
	b.waitText("#who", "Signed in as u-alice at "+w.idp.Issuer)
	b.waitText(card, "u-alice at "+w.idp.Issuer+", through agent")
	got, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{w.in.url + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	session := false
	for _, c := range got.Cookies {
		if c.Name == "toold_session" {
			session = true
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/" {
				t.Errorf("the session cookie: %+v", c)
			}
		}
		if c.Name == "toold_login" {
			t.Error("the sign-in's cookie outlived the sign-in")
		}
	}
	if !session {
		t.Fatalf("no session cookie: %+v", got.Cookies)
	}
	if jar := eval[string](b, `document.cookie`); strings.Contains(jar, "toold_session") {
		t.Error("a script can read the session cookie")
	}
	forged := eval[int](b, `fetch('/approvals/`+env.ExecutionID+`', {method: 'POST', credentials: 'same-origin',
		headers: {'Content-Type': 'application/json'}, body: JSON.stringify({approve: true})}).then(r => r.status)`)
	if forged != 403 {
		t.Errorf("a decision without the CSRF token: %d, want 403", forged)
	}
	// Her own call: the card says why she cannot decide, from the
	// listing's refusal, instead of offering the buttons.
	b.waitText(card+" .refusal", "the subject \"u-alice\" of "+w.idp.Issuer+" made this call and may not decide on it")
	if n := eval[int](b, `document.querySelectorAll('`+card+` button.approve').length`); n != 0 {
		t.Errorf("her own call offers %d approve buttons", n)
	}
	b.shot("sign-in-self-approval")

	b.do(chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("a.sign-in")))
	if code, _ := w.in.get("/approvals"); code != 401 {
		t.Errorf("after signing out, a request without credentials: %d", code)
	}
	b.signIn("bob", "bob-pw")
	b.waitText("#who", "Signed in as u-bob")
	b.waitText(card, "u-alice")
	b.do(chromedp.Click(chromedp.CSS(card + " button.approve")))
	b.waitText("#approvals-status", "Approved sleep called by u-alice at "+w.idp.Issuer+", through agent ("+env.ExecutionID+")")

	_, body = w.do(t, "GET", "/executions/"+env.ExecutionID+"?wait=10s", w.token(idAlice, "toold:call"), "")
	if json.Unmarshal(body, &env); env.Status != "success" {
		t.Errorf("the approved call: %s", body)
	}
	_, audit := w.do(t, "GET", "/audit", oauthOpsKey, "")
	for _, want := range []string{
		`"subject":"u-alice","client":"toold-console"},"action":"sign_in"`,
		`"subject":"u-bob","client":"toold-console"},"action":"sign_in"`,
		`"subject":"u-bob","client":"toold-console"},"action":"approve"`,
		`"target":"execution ` + env.ExecutionID + `: sleep called by u-alice@` + w.idp.Issuer,
	} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, audit)
		}
	}
}
