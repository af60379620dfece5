package delegate

import (
	"errors"
	"fmt"
)

// AuthorizationRequired is a caller who has not connected a downstream (or
// whose connection expired or was revoked): the consent step. URL is
// where their browser goes to authorize, a short-lived toold page bound to
// them; it holds no credential.
type AuthorizationRequired struct {
	Connection string
	URL        string
	// Reason says why, for the message: never connected, expired, revoked.
	Reason string
	// Shared: the connection serves every caller and only a caller with
	// the admin role can make it.
	Shared bool
}

func (e *AuthorizationRequired) Error() string {
	msg := fmt.Sprintf("the connection %q needs authorization", e.Connection)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// ErrUnavailable is an authorization server (or a resource's metadata)
// that could not be reached or read: retry later.
var ErrUnavailable = errors.New("the authorization server could not be reached")

// Refused is a downstream credential toold will not send: a passthrough
// token whose audience does not name the downstream, a token exchange
// without the caller's token. Message says why, for the caller.
type Refused struct{ Message string }

func (e *Refused) Error() string { return e.Message }
