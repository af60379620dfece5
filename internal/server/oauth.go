package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/tools"
)

// authEnabled reports whether callers must authenticate: keys, or token
// issuers, are configured.
func (s *Server) authEnabled() bool { return s.opts.Keyring.Enabled() || s.opts.OAuth != nil }

// credentials returns the request's caller, or the refusal. A bearer
// credential is an API key if it is one, else an access token of a
// trusted issuer; a refused token's 401 carries the challenge saying so.
// A credential is never logged, nor written into an answer. Two
// Authorization headers are refused (400) whether or not keys are
// configured: which one a proxy, a log or toold reads would differ.
func (s *Server) credentials(r *http.Request) (*auth.Principal, *tools.Error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return nil, tools.Errorf(tools.ValidationError, "the request carries more than one Authorization header").
			WithCode(tools.CodeInvalidHeader).WithSuggestion("send one header \"Authorization: Bearer <credential>\"")
	}
	if !s.authEnabled() {
		if w := s.opts.AnonymousWithheld; w != nil {
			if why := w(); why != "" {
				return nil, s.unauthenticated(r, "toold serves no anonymous caller here: a program it starts could reach its API ("+
					why+"), and would be that caller; the operator must configure auth.keys (toold -new-key makes one)", "")
			}
		}
		return auth.Anonymous, nil
	}
	header := r.Header.Get("Authorization")
	if header == "" && s.opts.OAuth != nil {
		if p, te, ok := s.sessionPrincipal(r); ok {
			return p, te
		}
	}
	scheme, cred, _ := strings.Cut(header, " ")
	cred = strings.TrimSpace(cred)
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		if s.opts.OAuth == nil {
			return nil, s.unauthenticated(r, "no API key was sent", "")
		}
		return nil, s.unauthenticated(r, "no API key or bearer token was sent", "")
	}
	if p := s.opts.Keyring.Authenticate(cred); p != nil {
		return p, nil
	}
	if s.opts.OAuth == nil {
		return nil, s.unauthenticated(r, "the API key is not valid", "")
	}
	p, err := s.opts.OAuth.Authenticate(r.Context(), cred)
	if err == nil {
		info(r).bearer = cred
		return p, nil
	}
	var oe *oauth.Error
	if errors.As(err, &oe) && oe.Unavailable {
		te := tools.Errorf(tools.OverloadError, "%s", oe.Description).WithCode(tools.CodeIssuerUnavailable).
			WithSuggestion("retry in a moment; the operator can find the cause in toold's log")
		te.RetryAfter = 5 * time.Second
		return nil, te
	}
	return nil, s.unauthenticated(r, "the bearer token is not valid: "+err.Error(), "invalid_token")
}

// unauthenticated is a 401's refusal; with token issuers configured it
// sets the challenge that sends an MCP client to the resource metadata,
// with error="invalid_token" when a token was presented and refused.
func (s *Server) unauthenticated(r *http.Request, msg, code string) *tools.Error {
	suggestion := "send the header \"Authorization: Bearer <key>\" with a key the operator issued"
	if v := s.opts.OAuth; v != nil {
		md := v.Metadata()
		suggestion = "send \"Authorization: Bearer <token>\" with an access token for " + md.Resource + " from " +
			strings.Join(md.AuthorizationServers, " or ") + " (" + oauth.MetadataPath + " says how), or an API key"
		info(r).challenge = oauth.Challenge{ResourceMetadata: v.MetadataURL(r.Host, r.TLS != nil), Error: code,
			Description: descriptionOf(code, msg)}.String()
	}
	return tools.NewPermissionError("%s", msg).WithCode(tools.CodeUnauthenticated).WithSuggestion("%s", suggestion)
}

// descriptionOf is a challenge's error_description: only with an error.
func descriptionOf(code, msg string) string {
	if code == "" {
		return ""
	}
	return msg
}

// challengeFor is the WWW-Authenticate of an answer: the one the request's
// authentication set, or for any other 401 the plain Bearer challenge.
func (s *Server) challengeFor(r *http.Request, status int) string {
	if c := info(r).challenge; c != "" && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		return c
	}
	if status == http.StatusUnauthorized {
		return wwwAuthenticate
	}
	return ""
}

// insufficientScope sets, for a token that lacks a role, the 403's
// challenge naming the scope that grants it.
func (s *Server) insufficientScope(r *http.Request, p *auth.Principal, need auth.Role) {
	if scope := s.opts.OAuth.ScopeFor(p, need); scope != "" {
		info(r).challenge = oauth.Challenge{ResourceMetadata: s.opts.OAuth.MetadataURL(r.Host, r.TLS != nil),
			Error: "insufficient_scope", Description: "the token does not grant the " + string(need) + " role",
			Scope: scope}.String()
	}
}

// resourceMetadata serves the protected resource metadata (RFC 9728): at
// the well-known path, and at it followed by the resource's path
// (/.well-known/oauth-protected-resource/mcp). It is public, and may be
// read from any origin.
func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, http.StatusOK, s.opts.OAuth.Metadata())
}
