package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// answer is what one attempt got back: the status, the headers and the body
// (read whole, within the cap, credentials scrubbed).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// classify decides what an attempt's outcome means; nil is success.
func (c *Client) classify(ctx context.Context, b *built, ans *answer, err error) *failure {
	if err != nil {
		return c.transportFailure(ctx, b, err)
	}
	if len(ans.body) > c.maxBytes {
		return &failure{err: tools.NewUserError("%s answered more than the tool's %d-byte cap", b.target, c.maxBytes).
			WithCode(tools.CodeResponseTooLarge).
			WithSuggestion("ask for less: a narrower query, fewer results per page (the operator can raise response.max_bytes)")}
	}
	st := ans.status
	switch {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusTooManyRequests || (st == http.StatusForbidden && rateLimited(ans.header)):
		return c.rateLimited(b, ans)
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return &failure{err: tools.NewPermissionError("the API refused toold's credentials for this tool: %s answered %s",
			b.target, statusText(st)).WithCode(tools.CodeUpstreamAuth).
			WithSuggestion("this is for the operator, not the model: check the credential of the tool %q (its auth: section and the "+
				"environment variable it reads); calling again will not help", c.name)}
	case st == http.StatusRequestTimeout || st == http.StatusBadGateway || st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout:
		f := c.serverFailure(b, ans)
		f.retry = true
		f.retryAfter, f.hasAfter = parseRetryAfter(ans.header.Get("Retry-After"), c.set.now())
		return f
	case st >= 500:
		return c.serverFailure(b, ans)
	case st >= 400:
		return &failure{err: tools.NewUserError("the API refused the request: %s answered %s%s", b.target, statusText(st),
			apiMessage(ans)).WithCode(tools.CodeUpstreamRejected).WithSuggestion("%s", clientSuggestion(st))}
	}
	return &failure{err: tools.Errorf(tools.SystemError, "%s answered %s, which the tool cannot use", b.target, statusText(st)).
		WithCode(tools.CodeUpstreamError).WithSuggestion("the API did not answer as declared; the operator should check the tool's request")}
}

func (c *Client) rateLimited(b *built, ans *answer) *failure {
	after, ok := parseRetryAfter(ans.header.Get("Retry-After"), c.set.now())
	f := &failure{retry: true, retryAfter: after, hasAfter: ok}
	msg := fmt.Sprintf("the API is rate-limiting toold: %s answered %s", b.target, statusText(ans.status))
	hint := "call again after retry_after_ms"
	if ok {
		c.host.pause(c.set.now(), after)
		msg += fmt.Sprintf(" and asks to wait %v", after.Round(time.Second))
		if after > maxReportedRetryAfter {
			hint = "that is longer than anyone should wait for this tool: use another tool, or tell the operator"
		}
	} else {
		after = time.Second
	}
	f.err = tools.Errorf(tools.OverloadError, "%s", msg).WithCode(tools.CodeUpstreamRateLimited).
		WithSuggestion("%s", hint).WithRetryAfter(min(after, maxReportedRetryAfter))
	return f
}

func (c *Client) serverFailure(b *built, ans *answer) *failure {
	e := tools.Errorf(tools.SystemError, "the API failed: %s answered %s%s", b.target, statusText(ans.status), apiMessage(ans)).
		WithCode(tools.CodeUpstreamError).WithSuggestion("the API's own failure; call again later, or use another tool")
	e.Retryable = true
	return &failure{err: e}
}

// transportFailure: no answer at all. The guard's refusals and redirects
// elsewhere are final; a certificate that does not verify will not verify
// on retry; the call's own deadline or its caller leaving end the call;
// anything else (refused, reset, DNS, an attempt's own timeout) may pass.
func (c *Client) transportFailure(ctx context.Context, b *built, err error) *failure {
	if ctx.Err() != nil {
		return &failure{err: ctx.Err()}
	}
	msg := c.clean(rootCause(err))
	var redirect *redirectError
	var cert *tls.CertificateVerificationError
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return &failure{err: tools.NewSecurityError("toold refused to connect: %s", msg).WithCode(tools.CodeSSRFRefused).
			WithSuggestion("this is for the operator: if the destination is meant to be reached, add it to the tool's allow list")}
	case errors.As(err, &redirect):
		return &failure{err: tools.NewSecurityError("%s", redirect.Error()).WithCode(tools.CodeRedirectRefused)}
	case errors.As(err, &cert):
		return &failure{err: tools.Errorf(tools.SystemError, "%s: the API's TLS certificate does not verify: %s", b.target, msg).
			WithCode(tools.CodeUpstreamUnreachable).Wrap(errors.New(msg))}
	}
	if errors.Is(err, context.DeadlineExceeded) { // the attempt's own timeout, not the call's
		msg = fmt.Sprintf("no answer within retry.attempt_timeout (%v)", c.retry.AttemptTimeout)
	}
	var op *net.OpError
	unsent := errors.As(err, &op) && op.Op == "dial"
	e := tools.Errorf(tools.SystemError, "%s could not be reached: %s", b.target, msg).WithCode(tools.CodeUpstreamUnreachable).
		WithSuggestion("the API or the network is down; call again later, or use another tool").Wrap(errors.New(msg))
	e.Retryable = true
	return &failure{err: e, retry: true, unsent: unsent}
}

// rootCause is the innermost message of a transport error: net/http's
// outer layers repeat the URL, whose query may hold a credential.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		var re *netguard.RefusedError
		if errors.As(err, &re) && err == error(re) {
			return re.Reason
		}
		err = next
	}
}

// clean scrubs a message of the credential.
func (c *Client) clean(s string) string {
	if c.scrub == nil {
		return s
	}
	return c.scrub.Replace(s)
}

// breakerVerdict: what says the host is unwell (no answer, a 5xx, an
// attempt timing out) counts against it; a rate limit, a refusal by the
// guard and a caller leaving are not its doing; any other answer is a
// success.
func breakerVerdict(ctx context.Context, ans *answer, err error) error {
	switch {
	case err != nil && (errors.Is(err, netguard.ErrRefused) || errors.Is(ctx.Err(), context.Canceled)):
		return errNotCounted
	case err != nil:
		var redirect *redirectError
		if errors.As(err, &redirect) {
			return errNotCounted
		}
		return errAttemptFailed
	case ans.status == http.StatusTooManyRequests:
		return errNotCounted
	case ans.status >= 500:
		return errAttemptFailed
	}
	return nil
}

func outcome(ans *answer) string {
	switch {
	case ans == nil:
		return "error"
	case ans.status == http.StatusTooManyRequests:
		return "429"
	}
	return fmt.Sprintf("%dxx", ans.status/100)
}

// rateLimited: a 403 that is a rate limit (GitHub's secondary limits say
// so with Retry-After or X-RateLimit-Remaining: 0), not a refusal.
func rateLimited(h http.Header) bool {
	return h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0"
}

func statusText(code int) string {
	if s := http.StatusText(code); s != "" {
		return fmt.Sprintf("%d %s", code, s)
	}
	return fmt.Sprint(code)
}

func clientSuggestion(status int) string {
	switch status {
	case http.StatusNotFound, http.StatusGone:
		return "the API does not know what the arguments name; check them (identifiers, spelling) or search first"
	case http.StatusConflict:
		return "the API's state conflicts with the request; read the current state, then call again"
	case http.StatusRequestEntityTooLarge, http.StatusRequestURITooLong:
		return "send less: shorter arguments"
	}
	return "fix the arguments the API's message points at, then call again"
}

// result shapes a successful answer: JSON (or text), then jq.
func (c *Client) result(ctx context.Context, b *built, ans *answer) (any, error) {
	var v any
	switch {
	case c.format == "text":
		v = string(ans.body)
	case len(bytes.TrimSpace(ans.body)) == 0:
		v = nil
	case c.jq == nil && jsontext.Value(ans.body).IsValid():
		// Valid (one value, UTF-8, no duplicate names): the answer is
		// the result as it is, not decoded only to be encoded again.
		return json.RawMessage(ans.body), nil
	default:
		var err error
		if v, err = strictjson.Decode(ans.body, 128); err != nil {
			return nil, tools.Errorf(tools.SystemError, "%s answered %s that is not JSON: %v%s", b.target,
				contentType(ans.header), err, snippet(ans.body)).WithCode(tools.CodeInvalidOutput).
				WithSuggestion("the API did not answer as declared; call again later, or use another tool")
		}
	}
	if c.jq == nil {
		return v, nil
	}
	return c.shape(ctx, b, v)
}

// shape runs the jq expression: one output is the result, several an
// array, none null.
func (c *Client) shape(ctx context.Context, b *built, v any) (any, error) {
	var out []any
	iter := c.jq.RunWithContext(ctx, v)
	for {
		x, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := x.(error); isErr {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, tools.Errorf(tools.SystemError, "the answer of %s does not fit the tool's jq expression: %v", b.target,
				c.clean(err.Error())).WithCode(tools.CodeInvalidOutput).
				WithSuggestion("the API's answer changed shape; the operator should check response.jq")
		}
		if out = append(out, x); len(out) > 100000 {
			return nil, tools.Errorf(tools.SystemError, "the tool's jq expression produced more than 100000 values").
				WithCode(tools.CodeInvalidOutput)
		}
	}
	switch len(out) {
	case 0:
		return nil, nil
	case 1:
		return out[0], nil
	}
	return out, nil
}

func contentType(h http.Header) string {
	if ct := oneLine(h.Get("Content-Type")); ct != "" {
		return ct
	}
	return "a body"
}
