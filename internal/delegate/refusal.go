package delegate

import (
	"errors"
	"time"

	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/tools"
)

// ToolError is what a tool answers when a downstream's credential for the
// caller cannot be had: the consent step (authorization_required with
// where to connect), a credential to set (credential_required), a
// credential toold will not send (delegation_refused), an authorization
// server that cannot be reached (issuer_unavailable, retry). nil for any
// other error. upstream names the downstream for the caller.
func ToolError(err error, upstream string) *tools.Error {
	var ar *AuthorizationRequired
	var missing *credentials.MissingError
	var refused *Refused
	switch {
	case errors.As(err, &ar):
		te := tools.NewPermissionError("%s has not been authorized for this caller (%s)", upstream, ar.Reason).
			WithCode(tools.CodeAuthorizationRequired)
		te.Upstream, te.AuthorizeURL = ar.Connection, ar.URL
		if ar.Shared {
			te.Message = upstream + " serves every caller through one connection, and nobody has authorized it yet (" + ar.Reason + ")"
			return te.WithSuggestion("a caller with the admin role opens GET /connections/%s/authorize in a browser and authorizes toold; then call again", ar.Connection)
		}
		return te.WithSuggestion("open authorize_url in a browser (it needs no toold credentials, and expires), authorize toold at %s, then call again; "+
			"GET /connections lists your connections", ar.Connection)
	case errors.As(err, &missing):
		te := tools.NewPermissionError("%s needs the caller's own credential %q, and none is set", upstream, missing.Name).
			WithCode(tools.CodeCredentialRequired).
			WithSuggestion("set it with PUT /credentials/%s {\"value\": \"...\"} (or in the console's Connections page), then call again", missing.Name)
		te.Upstream, te.Credential = upstream, missing.Name
		return te
	case errors.Is(err, credentials.ErrAnonymous):
		return tools.NewPermissionError("%s acts as the caller, and this caller is anonymous: %v", upstream, err).
			WithCode(tools.CodeDelegationRefused).WithSuggestion("call with an API key or an OAuth token, so toold knows whose credential to use")
	case errors.As(err, &refused):
		return tools.NewPermissionError("%s", refused.Message).WithCode(tools.CodeDelegationRefused)
	case errors.Is(err, ErrUnavailable):
		return tools.Errorf(tools.OverloadError, "the authorization server of %s could not be reached", upstream).
			WithCode(tools.CodeIssuerUnavailable).WithRetryAfter(5 * time.Second).
			WithSuggestion("retry in a moment; the operator can find the cause in toold's log").Wrap(err)
	}
	return nil
}
