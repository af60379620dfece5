package oauth

import (
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/toold/toold/internal/auth"
)

// MetadataPath is where the protected resource metadata is served; a
// resource with a path has it at this path followed by its own (RFC 9728
// §3.1: /.well-known/oauth-protected-resource/mcp for .../mcp).
const MetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the protected resource metadata (RFC 9728 §2) MCP
// clients read to learn where to get a token for toold.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata is the document: the resource is the first issuer's audience,
// and its authorization servers every issuer that issues tokens for it;
// the scopes are those that grant each role.
func (v *Verifier) Metadata() ResourceMetadata {
	resource := v.issuers[0].cfg.Audience
	md := ResourceMetadata{Resource: resource, BearerMethodsSupported: []string{"header"}, ResourceName: "toold",
		AuthorizationServers: []string{}, ScopesSupported: []string{}}
	for _, is := range v.issuers {
		if is.cfg.Audience != resource {
			continue
		}
		md.AuthorizationServers = append(md.AuthorizationServers, is.cfg.Issuer)
		for _, r := range auth.Roles {
			if s := is.scopeFor(r); s != "" && !slices.Contains(md.ScopesSupported, s) {
				md.ScopesSupported = append(md.ScopesSupported, s)
			}
		}
	}
	return md
}

// MetadataURL is the URL of the metadata, for a challenge's
// resource_metadata: derived from the resource when it is an http(s) URL
// (RFC 9728 §3.1), else from the request's host.
func (v *Verifier) MetadataURL(host string, secure bool) string {
	if u, err := url.Parse(v.issuers[0].cfg.Audience); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		return u.Scheme + "://" + u.Host + MetadataPath + strings.TrimSuffix(u.EscapedPath(), "/")
	}
	scheme := "https"
	if !secure && loopbackHost(host) {
		scheme = "http"
	}
	return scheme + "://" + host + MetadataPath
}

// ScopeFor is the scope that grants a role at the principal's issuer (for
// an insufficient_scope challenge); "" for a principal that is no token.
func (v *Verifier) ScopeFor(p *auth.Principal, r auth.Role) string {
	if v == nil || p.Kind != auth.KindToken {
		return ""
	}
	if is := v.byIssuer[p.Issuer]; is != nil {
		return is.scopeFor(r)
	}
	return ""
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
