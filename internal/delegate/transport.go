package delegate

import (
	"net/http"

	"github.com/toold/toold/internal/auth"
)

// Transport carries who's credential on every request to the downstream
// (an MCP server's session of theirs) and, after a 401, gets a new one —
// refreshed, or exchanged again — and sends the request once more (when
// its body can be sent again). A request's context may carry the caller's
// own token (WithInboundToken), which exchange and passthrough use.
func (c *Connection) Transport(base http.RoundTripper, who *auth.Identity) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, base: base, who: who}
}

type transport struct {
	c    *Connection
	base http.RoundTripper
	who  *auth.Identity
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	cred, err := t.c.Credential(ctx, t.who)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.send(req, cred)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot be sent again
	}
	next, rerr := t.c.Rejected(ctx, t.who, cred, resp.Header.Values("WWW-Authenticate"))
	if rerr != nil || next == nil {
		if rerr != nil {
			resp.Body.Close()
			return nil, rerr
		}
		return resp, nil
	}
	resp.Body.Close()
	again := req.Clone(ctx)
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return t.send(again, next)
}

func (t *transport) send(req *http.Request, cred *Credential) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", cred.Header)
	return t.base.RoundTrip(r)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
