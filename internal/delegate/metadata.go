package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// fetchTimeout bounds one request to an authorization server or a
// resource's metadata; maxDocBytes one document.
const (
	fetchTimeout = 10 * time.Second
	maxDocBytes  = 1 << 20
)

// ResourceMetadata is what toold reads of a protected resource's metadata
// (RFC 9728 §2).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// ServerMetadata is what toold reads of an authorization server's
// metadata (RFC 8414 §2, OpenID Connect Discovery).
type ServerMetadata struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint"`
	RevocationEndpoint            string   `json:"revocation_endpoint"`
	ScopesSupported               []string `json:"scopes_supported"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
	GrantTypesSupported           []string `json:"grant_types_supported"`
	// AuthorizationResponseIssParameterSupported: the authorization
	// response carries iss (RFC 9207), which the callback then checks.
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

// ParseResourceMetadata reads a protected resource metadata document and
// checks it names resource (RFC 9728 §3.3: a document for another
// resource is refused, so a server cannot send toold's tokens elsewhere)
// and names its authorization servers as https URLs (http where
// allowHTTP).
func ParseResourceMetadata(b []byte, resource string, allowHTTP bool) (*ResourceMetadata, error) {
	var md ResourceMetadata
	if err := json.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("the protected resource metadata is not JSON: %v", err)
	}
	if !sameResource(md.Resource, resource) {
		return nil, fmt.Errorf("the protected resource metadata is for %q, not %q", clip(md.Resource), resource)
	}
	if len(md.AuthorizationServers) == 0 {
		return nil, errors.New("the protected resource metadata names no authorization server")
	}
	for _, as := range md.AuthorizationServers {
		if err := checkURL(as, allowHTTP); err != nil {
			return nil, fmt.Errorf("authorization server %q: %v", clip(as), err)
		}
	}
	return &md, nil
}

// ParseServerMetadata reads an authorization server's metadata and checks
// it: issued by issuer exactly (a document naming another issuer is a
// mix-up), with https endpoints (http where allowHTTP), an authorization
// and a token endpoint, and PKCE with S256 (MCP's rule: a server that
// does not say it supports it is refused).
func ParseServerMetadata(b []byte, issuer string, allowHTTP bool) (*ServerMetadata, error) {
	return parseServerMetadata(b, issuer, allowHTTP, true)
}

// parseServerMetadata is ParseServerMetadata; pkce false leaves out the
// PKCE rule (token exchange, where no browser takes part).
func parseServerMetadata(b []byte, issuer string, allowHTTP, pkce bool) (*ServerMetadata, error) {
	var md ServerMetadata
	if err := json.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("the authorization server metadata is not JSON: %v", err)
	}
	if md.Issuer != issuer {
		return nil, fmt.Errorf("the authorization server metadata names the issuer %q, not %q", clip(md.Issuer), issuer)
	}
	for _, e := range []struct{ name, url string }{{"authorization_endpoint", md.AuthorizationEndpoint},
		{"token_endpoint", md.TokenEndpoint}} {
		if e.url == "" {
			return nil, fmt.Errorf("the authorization server metadata has no %s", e.name)
		}
	}
	for _, e := range []struct{ name, url string }{{"authorization_endpoint", md.AuthorizationEndpoint},
		{"token_endpoint", md.TokenEndpoint}, {"registration_endpoint", md.RegistrationEndpoint},
		{"revocation_endpoint", md.RevocationEndpoint}} {
		if e.url == "" {
			continue
		}
		if err := checkURL(e.url, allowHTTP); err != nil {
			return nil, fmt.Errorf("%s %q: %v", e.name, clip(e.url), err)
		}
	}
	if pkce && !slices.Contains(md.CodeChallengeMethodsSupported, "S256") {
		return nil, errors.New("the authorization server does not say it supports PKCE with S256 (code_challenge_methods_supported)")
	}
	return &md, nil
}

// checkURL accepts an absolute https URL (http when allowHTTP) without
// user information or fragment: an endpoint the browser or toold is sent
// to.
func checkURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "https" && !(allowHTTP && u.Scheme == "http"):
		return errors.New("not an https URL")
	case u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "":
		return errors.New("not an absolute URL with a host, without user information and fragment")
	}
	return nil
}

// sameResource compares resource identifiers as RFC 9728 asks (identical),
// forgiving a trailing slash.
func sameResource(a, b string) bool {
	return a != "" && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// clip shortens a value for a message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// resourceMetadataURLs are where a resource's metadata may be (RFC 9728
// §3.1, and MCP's fallback to the root): the challenge's, else the
// well-known path with the resource's path, then without.
func resourceMetadataURLs(resource, fromChallenge string) []string {
	if fromChallenge != "" {
		return []string{fromChallenge}
	}
	u, err := url.Parse(resource)
	if err != nil {
		return nil
	}
	root := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		return []string{root + p, root}
	}
	return []string{root}
}

// serverMetadataURLs are where an issuer's metadata may be (MCP's order):
// RFC 8414 with the path inserted, OpenID Connect with the path inserted,
// then OpenID Connect appended to the issuer.
func serverMetadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{origin + "/.well-known/oauth-authorization-server" + p, origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration"}
}

// getDoc GETs a JSON document within the caps.
func getDoc(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u, maxDocBytes)
	}
	return b, nil
}

// fetchResourceMetadata finds and checks a resource's metadata.
func fetchResourceMetadata(ctx context.Context, c *http.Client, resource, fromChallenge string, allowHTTP bool) (*ResourceMetadata, error) {
	var errs []error
	for _, u := range resourceMetadataURLs(resource, fromChallenge) {
		b, err := getDoc(ctx, c, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return ParseResourceMetadata(b, resource, allowHTTP)
	}
	return nil, fmt.Errorf("no protected resource metadata: %w", errors.Join(errs...))
}

// fetchServerMetadata finds and checks an issuer's metadata.
func fetchServerMetadata(ctx context.Context, c *http.Client, issuer string, allowHTTP bool) (*ServerMetadata, error) {
	var errs []error
	for _, u := range serverMetadataURLs(issuer) {
		b, err := getDoc(ctx, c, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return ParseServerMetadata(b, issuer, allowHTTP)
	}
	return nil, fmt.Errorf("no authorization server metadata for %s: %w", issuer, errors.Join(errs...))
}
