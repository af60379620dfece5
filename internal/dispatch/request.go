package dispatch

import "github.com/toold/toold/internal/auth"

// From is who makes a call: the name the tool, the logs and the rate
// limits see (the principal's name), the identity the envelope and the
// records show (nil for the anonymous caller), and the tools it may use
// (nil: all).
type From struct {
	Name     string
	Identity *auth.Identity
	Allowed  func(tool string) bool
}

// FromPrincipal is From for an authenticated principal, limited to its
// own tools.
func FromPrincipal(p *auth.Principal) From {
	return From{Name: p.Name, Identity: p.Who(), Allowed: p.Allows}
}

// NewRequest is a call of tool with its raw arguments (body), made under
// requestID by from. Every way in (REST, MCP, an execution's run, a
// batch's call) builds its calls here, so who a call is for is set the
// same way whichever transport brought it; what only one transport has
// (Unwrap, Timeout, ConfirmToken, Emit, ExecutionID, ...) it sets on the
// result.
func NewRequest(tool string, body []byte, requestID string, from From) *Request {
	return &Request{Tool: tool, Body: body, RequestID: requestID,
		Caller: from.Name, Principal: from.Identity, Allowed: from.Allowed}
}
