package main

import (
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is a configured client, as the provider asks about it.
type client struct{ cfg clientConfig }

var (
	_ op.Client           = (*client)(nil)
	_ op.HasRedirectGlobs = (*client)(nil)
)

func (c *client) audience() []string { return append(slices.Clone(c.cfg.Audience), c.cfg.ID) }

func (c *client) GetID() string                    { return c.cfg.ID }
func (c *client) RedirectURIs() []string           { return c.cfg.RedirectURIs }
func (c *client) RedirectURIGlobs() []string       { return c.cfg.RedirectURIs }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) PostLogoutRedirectURIGlobs() []string {
	return nil
}

// ApplicationType: a confidential client is a web application, a public
// one a native application (PKCE, loopback redirects).
func (c *client) ApplicationType() op.ApplicationType {
	if c.cfg.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *client) AuthMethod() oidc.AuthMethod {
	if c.cfg.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeClientCredentials,
		oidc.GrantTypeTokenExchange}
}

func (c *client) LoginURL(id string) string { return "/login/username?authRequestID=" + id }

func (c *client) AccessTokenType() op.AccessTokenType {
	if c.cfg.Opaque {
		return op.AccessTokenTypeBearer
	}
	return op.AccessTokenTypeJWT
}

func (c *client) IDTokenLifetime() time.Duration { return time.Hour }

// DevMode allows http redirect URIs on loopback for a web client.
func (c *client) DevMode() bool { return true }

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed grants toold's scopes (toold:call, ...) and "groups".
func (c *client) IsScopeAllowed(scope string) bool {
	return strings.HasPrefix(scope, "toold:") || scope == "groups"
}

func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
