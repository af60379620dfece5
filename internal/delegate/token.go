package delegate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1, §5.2; RFC
// 8693 §2.2).
type tokenResponse struct {
	AccessToken      string          `json:"access_token"`
	TokenType        string          `json:"token_type"`
	ExpiresIn        json.Number     `json:"expires_in"`
	RefreshToken     string          `json:"refresh_token"`
	Scope            string          `json:"scope"`
	IssuedTokenType  string          `json:"issued_token_type"`
	Error            string          `json:"error"`
	ErrorDescription string          `json:"error_description"`
	Extra            json.RawMessage `json:"-"`
}

// Grant is what a token endpoint granted.
type Grant struct {
	AccessToken  string
	TokenType    string
	RefreshToken string
	Expiry       time.Time // zero: the server did not say
	Scopes       []string  // nil: the server did not say
}

// TokenError is a token endpoint's refusal (RFC 6749 §5.2): OAuthError is its
// error code, cut to the characters the RFC allows; Description its
// description, printable and short. Neither holds a credential toold
// sent.
type TokenError struct {
	Status      int
	OAuthError  string
	Description string
}

func (e *TokenError) Error() string {
	msg := fmt.Sprintf("the authorization server refused: %s", e.OAuthError)
	if e.Description != "" {
		msg += " (" + e.Description + ")"
	}
	return msg
}

// InvalidGrant reports a refusal of the grant itself: the refresh token
// or code is spent, revoked or expired; only a new authorization helps.
func (e *TokenError) InvalidGrant() bool { return e.OAuthError == "invalid_grant" }

// maxExpiresIn bounds a lifetime a server states (ten years): a larger one
// is read as "did not say".
const maxExpiresIn = 10 * 365 * 24 * 3600

// ParseTokenResponse reads a token endpoint's answer: a grant on 200 with
// an access token, a *TokenError otherwise. now dates the expiry.
func ParseTokenResponse(status int, body []byte, now time.Time) (*Grant, error) {
	var tr tokenResponse
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&tr); err != nil {
		return nil, &TokenError{Status: status, OAuthError: "invalid_response", Description: "the token endpoint's answer is not JSON"}
	}
	if status != http.StatusOK || tr.Error != "" || tr.AccessToken == "" {
		return nil, &TokenError{Status: status, OAuthError: printableCode(cmp.Or(tr.Error, "invalid_response")), Description: printable(tr.ErrorDescription)}
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") && !strings.EqualFold(tr.TokenType, "n_a") {
		return nil, &TokenError{Status: status, OAuthError: "unsupported_token_type", Description: printable("toold sends bearer tokens only, not " + tr.TokenType)}
	}
	g := &Grant{AccessToken: tr.AccessToken, TokenType: cmp.Or(tr.TokenType, "Bearer"), RefreshToken: tr.RefreshToken}
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 && n < maxExpiresIn {
		g.Expiry = now.Add(time.Duration(n) * time.Second)
	} else if f, err := tr.ExpiresIn.Float64(); err == nil && f > 0 && f < maxExpiresIn {
		g.Expiry = now.Add(time.Duration(f * float64(time.Second)))
	}
	if tr.Scope != "" {
		g.Scopes = strings.Fields(tr.Scope)
	}
	if !validToken(g.AccessToken) || g.RefreshToken != "" && !validToken(g.RefreshToken) {
		return nil, &TokenError{Status: status, OAuthError: "invalid_response", Description: "a token holds characters a header cannot carry"}
	}
	return g, nil
}

// validToken accepts what can go into an Authorization header as is:
// printable ASCII without spaces, at most 16 KiB.
func validToken(t string) bool {
	if t == "" || len(t) > 16<<10 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] > '~' {
			return false
		}
	}
	return true
}

// printableCode keeps an error code to the characters RFC 6749 allows.
func printableCode(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b[i] = '_'
		}
	}
	return string(b)
}

// printable keeps a description short and printable.
func printable(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = ' '
		}
	}
	return strings.TrimSpace(string(b))
}

// clientAuth is how toold authenticates at a token endpoint.
type clientAuth struct {
	id, secret string
}

// postForm sends a form to an endpoint as the client: HTTP Basic with a
// secret (each part form-encoded, RFC 6749 §2.3.1), else client_id in the
// body (a public client).
func postForm(ctx context.Context, c *http.Client, endpoint string, ca clientAuth, form url.Values) (int, []byte, error) {
	if ca.secret == "" && ca.id != "" {
		form.Set("client_id", ca.id)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if ca.secret != "" {
		req.SetBasicAuth(url.QueryEscape(ca.id), url.QueryEscape(ca.secret))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(b) > maxDocBytes {
		return 0, nil, errors.New("the answer is larger than allowed")
	}
	return resp.StatusCode, b, nil
}

// requestToken posts a grant to the token endpoint and reads the answer.
func requestToken(ctx context.Context, c *http.Client, endpoint string, ca clientAuth, form url.Values, now func() time.Time) (*Grant, error) {
	status, body, err := postForm(ctx, c, endpoint, ca, form)
	if err != nil {
		return nil, &unreachable{err}
	}
	return ParseTokenResponse(status, body, now())
}

// unreachable is an authorization server that did not answer.
type unreachable struct{ err error }

func (e *unreachable) Error() string {
	return "the authorization server could not be reached: " + e.err.Error()
}
func (e *unreachable) Unwrap() error { return e.err }
