package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// The consent step over MCP: a call that needs the caller to connect a
// downstream first (authorization_required) is answered, for a client that
// takes URL-mode elicitations (2025-11-25), with URLElicitationRequiredError
// (-32042) naming the authorize URL, which the client opens for its user;
// any other client gets the tool error, whose text carries the URL.

// urlElicitKey marks a call whose HTTP client declared URL elicitation
// (read from its session id).
type urlElicitKey struct{}

// takesURL reports whether the call's client takes URL-mode elicitations:
// declared at initialize (over HTTP, carried by the session id; over
// stdio, the session's), or in a multi-round-trip request's capabilities.
func takesURL(ctx context.Context, req *mcp.CallToolRequest) bool {
	if v, _ := ctx.Value(urlElicitKey{}).(bool); v {
		return true
	}
	if p := peerOf(ctx); p != nil && p.caps().URL {
		return true
	}
	if caps := roundTrips(req); caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil {
		return true
	}
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil &&
			ip.Capabilities.Elicitation.URL != nil {
			return true
		}
	}
	return false
}

// consentElicitation is the -32042 error for a call that needs the
// caller's consent, where the client takes it; nil otherwise.
func consentElicitation(ctx context.Context, req *mcp.CallToolRequest, env *dispatch.Envelope) error {
	e := env.Error
	if e == nil || e.Code != tools.CodeAuthorizationRequired || e.AuthorizeURL == "" || !takesURL(ctx, req) {
		return nil
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	return mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{Mode: "url", URL: e.AuthorizeURL,
		ElicitationID: hex.EncodeToString(id[:]), Message: e.Message + ". Open the page to authorize toold, then call the tool again."}})
}
