package delegate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// registration is the client metadata toold registers (RFC 7591 §2): a
// public web client of the authorization code grant with PKCE, redirected
// to its callback.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ClientName              string   `json:"client_name"`
	Scope                   string   `json:"scope,omitempty"`
}

// ParseRegistration reads a registration endpoint's answer (RFC 7591
// §3.2.1): a client_id, and a client_secret when the server issued one.
func ParseRegistration(status int, body []byte) (id, secret string, err error) {
	var out struct {
		ClientID         string `json:"client_id"`
		ClientSecret     string `json:"client_secret"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if json.Unmarshal(body, &out) != nil {
		return "", "", fmt.Errorf("the registration endpoint answered %d, not JSON", status)
	}
	if status != http.StatusCreated && status != http.StatusOK || out.ClientID == "" {
		return "", "", fmt.Errorf("the registration endpoint refused (%d): %s %s", status, printableCode(out.Error), printable(out.ErrorDescription))
	}
	if !validToken(out.ClientID) || out.ClientSecret != "" && !validToken(out.ClientSecret) {
		return "", "", errors.New("the registration endpoint issued a client_id or secret with characters toold cannot send")
	}
	return out.ClientID, out.ClientSecret, nil
}

// register registers toold as a client at endpoint.
func register(ctx context.Context, c *http.Client, endpoint, redirect string, scopes []string) (string, string, error) {
	meta := registration{RedirectURIs: []string{redirect}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none", ClientName: "toold"}
	if len(scopes) > 0 {
		meta.Scope = joinScopes(scopes)
	}
	b, _ := json.Marshal(meta)
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(b))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", "", &unreachable{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes))
	if err != nil {
		return "", "", &unreachable{err}
	}
	return ParseRegistration(resp.StatusCode, body)
}
