package oauth

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/oauth/oidctest"
)

// TestSessionOutlivesItsToken: against the real provider, with access
// tokens that live one second, a console session asks for offline_access,
// keeps its refresh token server-side (the cookie carries none), outlives
// its first access token and the next (eight requests at once after an
// expiry all pass: the provider rotates refresh tokens, so a second trade
// of the same one is refused, and the requests that wait read the first
// one's), ends when the provider refuses
// the refresh (the grant revoked there). No log line quotes a token.
func TestSessionOutlivesItsToken(t *testing.T) {
	console := oidctest.Client{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:8080/auth/callback"},
		Audience: []string{resource}, AccessTTL: 1}
	p := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}, Users: []oidctest.User{alice}})
	core, logs := observer.New(zap.DebugLevel)
	v, err := New(Options{Logger: zap.New(core), Issuers: Issuers{{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"},
		AllowHTTP: true, Skew: time.Nanosecond, Console: Console{ClientID: "console", ClientSecret: "console-secret"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	signIn := func() *http.Cookie {
		t.Helper()
		cookie, scope := signInAlice(t, v)
		if !strings.HasSuffix(scope, " offline_access") {
			t.Fatalf("the sign-in asked for %q, without offline_access", scope)
		}
		return cookie
	}
	cookie := signIn()
	st, rec := readSession(t, v, cookie)
	if !st.Refresh || rec == nil || rec.Refresh == "" || strings.Contains(cookie.Value, rec.Refresh) {
		t.Fatalf("the session keeps no refresh token server-side: %+v %v", st, rec != nil)
	}
	if cookie.MaxAge < int(time.Hour.Seconds()) {
		t.Errorf("the cookie lives %ds: a session with a refresh token lasts session_ttl, not its first token", cookie.MaxAge)
	}
	seen := []string{rec.Access, rec.Refresh}

	// Past the first token's expiry, and the second's with eight requests
	// at once: each time still alice, with a new access and refresh token.
	for round := range 2 {
		expire(t, v, rec.Access)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if s, err := v.Session(ctx, request("/tools", cookie), false); err != nil || s == nil || s.Principal.Subject != "u-alice" {
					t.Errorf("round %d: the session after its access token expired: %+v %v", round, s, err)
				}
			})
		}
		wg.Wait()
		_, rec = readSession(t, v, cookie)
		if rec == nil || rec.Access == seen[len(seen)-2] || rec.Refresh == seen[len(seen)-1] {
			t.Fatalf("round %d: the session's tokens were not refreshed", round)
		}
		seen = append(seen, rec.Access, rec.Refresh)
	}

	// The person's grant revoked at the provider: the next refresh is
	// refused, and the session ends, its cookie's own token with it.
	p.Revoke(console, rec.Refresh)
	expire(t, v, rec.Access)
	if s, err := v.Session(ctx, request("/tools", cookie), false); err != nil || s != nil {
		t.Fatalf("the session after its refresh was refused: %+v %v", s, err)
	}
	if _, rec := readSession(t, v, cookie); rec != nil {
		t.Error("an ended session's record is still kept")
	}
	if revoked, _ := v.revoked.Revoked(ctx, revocationKey(st.ID)); !revoked {
		t.Error("an ended session is not recorded as revoked")
	}

	if logs.Len() == 0 {
		t.Error("the refused refresh was not logged")
	}
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		for _, tok := range seen {
			if strings.Contains(line, tok) {
				t.Errorf("a log line quotes a token: %s", e.Message)
			}
		}
	}
}

// TestSignOutRevokesAtTheProvider: for a confidential console client and
// a public one (its client_id in the form, no secret), a session refreshes
// past its access token, and a sign-out's refresh token is refused by the
// provider afterwards.
func TestSignOutRevokesAtTheProvider(t *testing.T) {
	for _, secret := range []string{"console-secret", ""} {
		t.Run(map[bool]string{true: "confidential", false: "public"}[secret != ""], func(t *testing.T) {
			console := oidctest.Client{ID: "console", Secret: secret, RedirectURIs: []string{"http://127.0.0.1:8080/auth/callback"},
				Audience: []string{resource}, AccessTTL: 1}
			p := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}, Users: []oidctest.User{alice}})
			v, err := New(Options{Issuers: Issuers{{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true,
				Skew: time.Nanosecond, Console: Console{ClientID: "console", ClientSecret: secret}}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			cookie, _ := signInAlice(t, v)
			_, first := readSession(t, v, cookie)
			if first == nil {
				t.Fatal("no refresh token kept")
			}
			expire(t, v, first.Access)
			s, err := v.Session(ctx, request("/tools", cookie), false)
			_, rec := readSession(t, v, cookie)
			if err != nil || s == nil || rec == nil || rec.Refresh == first.Refresh {
				t.Fatalf("the session past its first token: %+v %v", s, err)
			}
			if err := v.SignOut(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := p.Refresh(console, rec.Refresh); err == nil {
				t.Error("the provider still honours a signed-out session's refresh token")
			}
			if s, _ := v.Session(ctx, request("/tools", cookie), false); s != nil {
				t.Error("a signed-out session still opens")
			}
		})
	}
}

// TestSessionWithoutRefreshToken: a console whose scopes leave out
// offline_access gets no refresh token, and its session lives no longer
// than its access token (five minutes at this provider).
func TestSessionWithoutRefreshToken(t *testing.T) {
	console := oidctest.Client{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:8080/auth/callback"},
		Audience: []string{resource}}
	p := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}, Users: []oidctest.User{alice}})
	v, err := New(Options{Issuers: Issuers{{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true,
		Console: Console{ClientID: "console", ClientSecret: "console-secret", Scopes: []string{"openid", "toold:call"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	cookie, _ := signInAlice(t, v)
	st, rec := readSession(t, v, cookie)
	if st.Refresh || rec != nil || cookie.MaxAge > 301 {
		t.Errorf("a session without offline_access: refresh %v, record %v, cookie for %ds", st.Refresh, rec != nil, cookie.MaxAge)
	}
}

// TestRefreshRacedByAnotherReplica: two replicas read a session's record
// before either refreshed it, and both trade its refresh token. The
// provider rotates refresh tokens, so the second trade fails, and the
// loser must use the record the winner writes a moment later rather than
// end the session or answer 503. The winner is played by the test: it
// trades the token first, puts the stale record back, and writes the new
// one 200 ms after the loser's request began. The real provider refuses a
// spent token invalid_grant; when the two trades overlap it answers
// server_error instead ("invalid refresh token": the cause of
// TestSessionRefreshesOnEveryReplica's occasional 503 under load), which
// no test can schedule, so the second case answers the spent token's trade
// so, in front of the real provider.
func TestRefreshRacedByAnotherReplica(t *testing.T) {
	for _, serverError := range []bool{false, true} {
		t.Run(map[bool]string{false: "invalid_grant", true: "server_error"}[serverError], func(t *testing.T) {
			raceRefresh(t, serverError)
		})
	}
}

func raceRefresh(t *testing.T, serverError bool) {
	console := oidctest.Client{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:8080/auth/callback"},
		Audience: []string{resource}, AccessTTL: 1}
	p := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}, Users: []oidctest.User{alice}})
	v, err := New(Options{Issuers: Issuers{{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"},
		AllowHTTP: true, Skew: time.Nanosecond, Console: Console{ClientID: "console", ClientSecret: "console-secret"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cookie, _ := signInAlice(t, v)
	st, first := readSession(t, v, cookie)
	key := tokensKey(st.ID)
	stale, ok, err := v.tokens.Get(ctx, key)
	if err != nil || !ok || first == nil {
		t.Fatalf("no record after the sign-in: %v", err)
	}
	// The winner's refresh: the first refresh token is traded, and spent.
	expire(t, v, first.Access)
	if s, err := v.Session(ctx, request("/tools", cookie), false); err != nil || s == nil {
		t.Fatalf("the winner's refresh: %+v %v", s, err)
	}
	fresh, _, err := v.tokens.Get(ctx, key)
	if err != nil || fresh == stale {
		t.Fatalf("the winner did not refresh: %v", err)
	}
	if serverError {
		client := v.signins[0].is.client
		client.Transport = spentTokenFails{next: cmp.Or[http.RoundTripper](client.Transport, http.DefaultTransport), spent: first.Refresh}
	}
	// The loser still sees the stale record; the winner's lands later.
	until := time.Unix(st.Expires, 0)
	if err := v.tokens.Put(ctx, key, stale, until); err != nil {
		t.Fatal(err)
	}
	landed := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		landed <- v.tokens.Put(ctx, key, fresh, until)
	}()
	s, err := v.Session(ctx, request("/tools", cookie), false)
	if err := <-landed; err != nil {
		t.Fatal(err)
	}
	if err != nil || s == nil || s.Principal.Subject != "u-alice" {
		t.Fatalf("the loser of the race: %+v %v; want the winner's tokens", s, err)
	}
	if _, rec := readSession(t, v, cookie); rec == nil || rec.Refresh == first.Refresh {
		t.Error("the loser left the spent refresh token in the record")
	}
}

// spentTokenFails answers a token request that trades the spent refresh
// token as the provider does when two trades of it overlap: 500
// server_error. Every other request goes to the provider.
type spentTokenFails struct {
	next  http.RoundTripper
	spent string
}

func (s spentTokenFails) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if form, _ := url.ParseQuery(string(body)); form.Get("refresh_token") == s.spent {
			return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Request: r,
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   io.NopCloser(strings.NewReader(`{"error":"server_error","error_description":"invalid refresh token"}`))}, nil
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return s.next.RoundTrip(r)
}

// signInAlice signs alice in to the console through the provider, as her
// browser would, and returns the session cookie and the scope asked for.
func signInAlice(t *testing.T, v *Verifier) (*http.Cookie, string) {
	t.Helper()
	ctx := context.Background()
	to, cookies, err := v.BeginSignIn(ctx, 0, "127.0.0.1:8080", false, "/console/")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(to)
	back := browse(t, to, "alice", "alice-pw")
	session, _, _, err := v.FinishSignIn(ctx, request(back.Path+"?"+back.RawQuery, cookies...), false)
	if err != nil {
		t.Fatal(err)
	}
	return session, u.Query().Get("scope")
}

// readSession opens a session cookie and its server-side record.
func readSession(t *testing.T, v *Verifier, c *http.Cookie) (*sessionState, *sessionTokens) {
	t.Helper()
	si := v.signins[0]
	var st sessionState
	if err := si.sealer.open(c.Name, c.Value, &st); err != nil {
		t.Fatal(err)
	}
	rec, err := v.getTokens(context.Background(), si, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &st, rec
}

// expire waits until the provider's access token is refused: past its
// exp (one second), polled, bounded.
func expire(t *testing.T, v *Verifier, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := v.Authenticate(context.Background(), token); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the access token did not expire within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
