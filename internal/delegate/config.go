package delegate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// OAuthConfig is auth.oauth of an HTTP API tool or a hosted MCP server:
// toold as an OAuth client of the downstream's authorization server.
type OAuthConfig struct {
	// PerUser: each principal authorizes for themselves, and their calls
	// carry their own token. Off, one connection (made by a caller with
	// the admin role) serves every caller.
	PerUser bool `yaml:"per_user"`
	// ClientID is toold's client at the authorization server; left out,
	// toold registers itself (RFC 7591) where the server offers it.
	ClientID string `yaml:"client_id"`
	// ClientSecret makes toold a confidential client; without it a public
	// one (PKCE alone).
	ClientSecret string `yaml:"client_secret"`
	// Scopes asked for; for an MCP server left out, those its challenge or
	// its resource metadata name.
	Scopes []string `yaml:"scopes"`
	// Issuer is the authorization server: required for an HTTP API tool;
	// for an MCP server discovered from the server (RFC 9728), and when
	// set it must be one the server names.
	Issuer string `yaml:"issuer"`
	// Resource is the resource indicator (RFC 8707) tokens are asked for:
	// for an MCP server its URL (the default), for an HTTP API tool none
	// unless set.
	Resource string `yaml:"resource"`
}

// ExchangeConfig is auth.token_exchange: the caller's own access token
// (from auth.oauth) traded at Issuer (RFC 8693) for one the downstream
// accepts, cached per principal until it expires.
type ExchangeConfig struct {
	Issuer       string   `yaml:"issuer"`
	Audience     string   `yaml:"audience"`
	Resource     string   `yaml:"resource"`
	Scopes       []string `yaml:"scopes"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
}

// Check reports what is wrong with an oauth section; mcp says it is an MCP
// server's (whose authorization server may be discovered).
func (c *OAuthConfig) Check(mcp bool) error {
	var errs []error
	if c.Issuer == "" && !mcp {
		errs = append(errs, errors.New("issuer: required for an HTTP API tool (an MCP server's is discovered)"))
	}
	if c.ClientSecret != "" && c.ClientID == "" {
		errs = append(errs, errors.New("client_secret: given without client_id (a registered client gets its own)"))
	}
	for _, f := range []struct{ name, v string }{{"issuer", c.Issuer}, {"resource", c.Resource}} {
		if f.v != "" && !absoluteURL(f.v) {
			errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", f.name, f.v))
		}
	}
	errs = append(errs, checkScopes(c.Scopes))
	return errors.Join(errs...)
}

// Check reports what is wrong with a token_exchange section.
func (c *ExchangeConfig) Check() error {
	var errs []error
	if !absoluteURL(c.Issuer) {
		errs = append(errs, errors.New("issuer: required, an http(s) URL"))
	}
	if c.Audience == "" && c.Resource == "" {
		errs = append(errs, errors.New("audience: required (or resource): what the exchanged token is for"))
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("client_id: required: the client toold exchanges tokens as"))
	}
	errs = append(errs, checkScopes(c.Scopes))
	return errors.Join(errs...)
}

func checkScopes(scopes []string) error {
	for _, s := range scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") || !validToken(s) {
			return fmt.Errorf("scopes: %q is not a scope (printable, without spaces or quotes)", s)
		}
	}
	return nil
}

func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func joinScopes(s []string) string { return strings.Join(s, " ") }
