// Package oidctest starts, for tests, the real OpenID Provider toold's
// identity tests sign in with: zitadel/oidc's OpenID-certified provider,
// built from test/oidc (its own module, pinned there) by .ci/run, and found
// through TOOLD_OIDC (or toold-oidc on PATH). It runs on a loopback port
// of its own, with the clients and users a test gives it, and is stopped
// when the test ends. There is no stand-in: without the binary a test
// skips, saying how to build it, and fails where TOOLD_REQUIRE_OIDC=1 (as
// .ci/run sets).
package oidctest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toold/toold/internal/testpeer"
)

// Client is a client the provider knows.
type Client struct {
	ID           string   `json:"id"`
	Secret       string   `json:"secret,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	// Audience is what its access tokens are issued for (its id is
	// added).
	Audience []string `json:"audience"`
	// Opaque makes its access tokens opaque (introspected).
	Opaque bool `json:"opaque,omitempty"`
	// ResourceAudience issues its tokens for the resource an
	// authorization request names (RFC 8707) rather than Audience.
	ResourceAudience bool `json:"resource_audience,omitempty"`
	// Exchange lets it exchange a user's token for another audience
	// without an actor token (RFC 8693).
	Exchange bool `json:"exchange,omitempty"`
	// AccessTTL is its access tokens' lifetime in seconds (0: five
	// minutes).
	AccessTTL int `json:"access_ttl,omitempty"`
	// IntrospectWithoutAud leaves aud out of the introspection answers
	// about its tokens (most IdPs name it).
	IntrospectWithoutAud bool `json:"introspect_without_aud,omitempty"`
}

// User is a person who can sign in.
type User struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Groups   []string `json:"groups,omitempty"`
}

// Config is what the provider serves.
type Config struct {
	Clients []Client `json:"clients"`
	Users   []User   `json:"users"`
}

// Provider is a running provider.
type Provider struct {
	// Issuer is its issuer URL, "http://127.0.0.1:<port>/".
	Issuer string
	t      testing.TB
	http   *http.Client
	stop   func()
}

// Stop stops the provider before the test ends: its port then refuses
// connections.
func (p *Provider) Stop() { p.stop() }

// Binary finds the provider's binary; without one the test skips (or
// fails, with TOOLD_REQUIRE_OIDC=1).
func Binary(t testing.TB) string {
	t.Helper()
	return testpeer.Binary(t, "TOOLD_OIDC", "toold-oidc", "TOOLD_REQUIRE_OIDC",
		"no OpenID Provider to test against. Build it with "+
			"`(cd test/oidc && go build -o \"$(go env GOPATH)/bin/toold-oidc\" .)` (as .ci/run does), or set TOOLD_OIDC to its path")
}

// Start runs a provider with cfg until the test ends.
func Start(t testing.TB, cfg Config) *Provider {
	t.Helper()
	bin := Binary(t)
	file := filepath.Join(t.TempDir(), "oidc.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0", "-config", file)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() { cancel(); _ = cmd.Wait() })
	t.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "issuer ")
	if err != nil || !ok {
		t.Fatalf("the provider did not say its issuer: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &Provider{Issuer: issuer, t: t, stop: stop, http: &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Token is a token endpoint's answer.
type Token struct {
	AccessToken string `json:"access_token"`
	IDToken     string `json:"id_token"`
	ExpiresIn   int    `json:"expires_in"`
}

// ClientCredentials gets a token for a confidential client itself.
func (p *Provider) ClientCredentials(c Client, scopes ...string) Token {
	p.t.Helper()
	return p.token(c, url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}})
}

// Exchange trades a subject's token for one the client holds on their
// behalf, naming the actor (RFC 8693 delegation): the new token's act
// claim names the actor token's subject.
func (p *Provider) Exchange(c Client, subjectToken, actorToken string, audience string, scopes ...string) Token {
	p.t.Helper()
	return p.token(c, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token": {subjectToken}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"actor_token": {actorToken}, "actor_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"audience":             {audience}, "scope": {strings.Join(scopes, " ")}})
}

// SignIn signs a user in with the authorization code flow and PKCE, as a
// browser would (the provider's login form, posted), and exchanges the
// code for the client's tokens.
func (p *Provider) SignIn(c Client, u User, scopes ...string) Token {
	p.t.Helper()
	verifier := random()
	sum := sha256.Sum256([]byte(verifier))
	redirect := strings.Replace(c.RedirectURIs[0], "*", "1", 1)
	q := url.Values{"client_id": {c.ID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {strings.Join(scopes, " ")}, "state": {random()},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	login := p.redirect(http.NewRequest(http.MethodGet, p.Issuer+"auth?"+q.Encode(), nil))
	id := login.Query().Get("authRequestID")
	form := url.Values{"id": {id}, "username": {u.Username}, "password": {u.Password}}
	req, err := http.NewRequest(http.MethodPost, p.Issuer+"login/username", strings.NewReader(form.Encode()))
	if err == nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	back := p.redirect(req, err)
	code := p.redirect(http.NewRequest(http.MethodGet, back.String(), nil)).Query().Get("code")
	if code == "" {
		p.t.Fatalf("signing %s in gave no code", u.Username)
	}
	return p.token(c, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {verifier}})
}

// Authorize signs a user in at an authorization URL another client built
// (toold's, with its state, PKCE and resource), as a browser would: the
// provider's login form, posted; it returns where the provider sends the
// browser back, the client's redirect URI with the code and state.
func (p *Provider) Authorize(u User, authorizeURL string) *url.URL {
	p.t.Helper()
	login := p.redirect(http.NewRequest(http.MethodGet, authorizeURL, nil))
	id := login.Query().Get("authRequestID")
	if id == "" {
		p.t.Fatalf("the provider did not send the browser to its login page: %s", login)
	}
	form := url.Values{"id": {id}, "username": {u.Username}, "password": {u.Password}}
	req, err := http.NewRequest(http.MethodPost, p.Issuer+"login/username", strings.NewReader(form.Encode()))
	if err == nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	back := p.redirect(req, err)
	return p.redirect(http.NewRequest(http.MethodGet, back.String(), nil))
}

// Refresh trades a refresh token at the provider for a client (nil error:
// the provider still honours it).
func (p *Provider) Refresh(c Client, refreshToken string) error {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}
	if c.Secret == "" {
		form.Set("client_id", c.ID)
	}
	req, err := http.NewRequest(http.MethodPost, p.Issuer+"oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.Secret != "" {
		req.SetBasicAuth(c.ID, c.Secret)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}

// Revoke revokes a token at the provider's revocation endpoint (RFC 7009)
// as client c, as a person would by ending a grant at their IdP.
func (p *Provider) Revoke(c Client, token string) {
	p.t.Helper()
	resp := p.post(c, "revoke", url.Values{"token": {token}})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		p.t.Fatalf("revoking a token: %s: %s", resp.Status, b)
	}
}

// Rotate makes the provider sign with a new key; drop stops it publishing
// the old one.
func (p *Provider) Rotate(drop bool) {
	p.t.Helper()
	u := p.Issuer + "rotate"
	if drop {
		u += "?drop=1"
	}
	resp, err := p.http.Post(u, "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.t.Fatalf("rotating the provider's key: %v %v", resp, err)
	}
	resp.Body.Close()
}

// JWKS is the provider's published key set, as served.
func (p *Provider) JWKS() []byte {
	p.t.Helper()
	resp, err := p.http.Get(p.Issuer + "keys")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

func (p *Provider) redirect(req *http.Request, err error) *url.URL {
	p.t.Helper()
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		b, _ := io.ReadAll(resp.Body)
		p.t.Fatalf("%s %s: %s, no redirect: %s", req.Method, req.URL.Path, resp.Status, b)
	}
	return loc
}

// post sends form to the provider's endpoint at path as client c: its
// secret in Basic auth, or its id in the form for a public client.
func (p *Provider) post(c Client, path string, form url.Values) *http.Response {
	p.t.Helper()
	if c.Secret == "" {
		form.Set("client_id", c.ID)
	}
	req, err := http.NewRequest(http.MethodPost, p.Issuer+path, strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.Secret != "" {
		req.SetBasicAuth(c.ID, c.Secret)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp
}

func (p *Provider) token(c Client, form url.Values) Token {
	p.t.Helper()
	resp := p.post(c, "oauth/token", form)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var tok Token
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &tok) != nil || tok.AccessToken == "" {
		p.t.Fatalf("the token endpoint answered %s: %s", resp.Status, b)
	}
	return tok
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// String names the provider in test logs.
func (p *Provider) String() string { return fmt.Sprintf("OpenID Provider %s", p.Issuer) }
