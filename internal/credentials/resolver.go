package credentials

import (
	"context"

	"github.com/toold/toold/internal/auth"
)

// Resolver resolves a principal's own secret at the moment of an outbound request.
//
// It is the one way code that makes a request (the HTTP API client, the
// upstream MCP client, the egress proxy of a sandboxed run) reaches a
// principal's credential: asked by the principal and the credential's
// name, at the last moment, so the value never becomes part of a call, an
// envelope, an event, a log line, a span, an error text, an audit record,
// /metrics or a sandbox's environment. who == nil is the anonymous caller,
// the principal "local".
type Resolver interface {
	Resolve(ctx context.Context, who *auth.Identity, name string) ([]byte, error) // errors.Is(err, ErrMissing) when the principal has none
}
