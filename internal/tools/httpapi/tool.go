package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/itchyny/gojq"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// tool is one declared HTTP API tool.
type tool struct {
	set      *Set
	spec     tools.Spec
	req      *request
	client   *http.Client
	host     *host
	limiter  *rate.Limiter
	retry    RetryConfig
	format   string
	maxBytes int
	jq       *gojq.Code
	defaults map[string]any
	scrub    *strings.Replacer
}

var (
	_ tools.Tool             = (*tool)(nil)
	_ tools.UpstreamReporter = (*tool)(nil)
)

func (t *tool) Spec() tools.Spec { return t.spec }

// Upstream reports the host's breaker for discovery.
func (t *tool) Upstream() tools.Upstream { return t.host.upstream() }

// answer is what one attempt got back: the status, the headers and the body
// (read whole, within the cap, credentials scrubbed).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// Execute builds the request from the arguments, sends it (retrying what
// may be retried, within the deadline) and shapes the answer.
func (t *tool) Execute(ctx context.Context, call *tools.Call) (any, error) {
	args := map[string]any{}
	if err := call.Decode(&args); err != nil {
		return nil, err
	}
	// A null argument is kept: it is absent to the request, and takes no
	// default.
	tools.ApplyDefaults(args, t.defaults)
	b, err := t.req.build(args)
	if err != nil {
		return nil, err
	}
	ans, err := t.send(ctx, call, b)
	if err != nil {
		return nil, err
	}
	return t.result(ctx, b, ans)
}

// failure is an attempt that did not succeed: the error to answer with if
// it is the last, and whether and when to try again.
type failure struct {
	err        error
	retry      bool // the failure may pass on another attempt
	unsent     bool // nothing reached the API: safe to retry any method
	retryAfter time.Duration
	hasAfter   bool // the API said when
}

// send runs the attempts: each passes the rate limits and the host's
// breaker, and what fails in a way another attempt may fix is retried —
// for idempotent tools, or when nothing was sent — after a backoff or the
// API's Retry-After, as long as the wait and another attempt fit the
// deadline.
func (t *tool) send(ctx context.Context, call *tools.Call, b *built) (*answer, error) {
	var took time.Duration
	for n := 1; ; n++ {
		if err := t.admit(ctx, call, took); err != nil {
			return nil, err
		}
		done, err := t.host.breaker.Allow()
		if err != nil {
			t.set.metrics.refusals.WithLabelValues(t.spec.Name, "circuit_open").Inc()
			return nil, t.host.refusal(err)
		}
		call.CountAttempt()
		start := time.Now()
		ans, err := t.attempt(ctx, b)
		took = time.Since(start)
		f := t.classify(ctx, b, ans, err)
		done(breakerVerdict(ctx, ans, err))
		t.set.metrics.attempt(t.spec.Name, t.host.name, outcome(ans), took)
		if f == nil {
			return ans, nil
		}
		if !f.retry || n >= t.retry.Attempts || !(t.spec.Effects.Idempotent || f.unsent) || ctx.Err() != nil {
			return nil, f.err
		}
		wait, reason := backoff(n, t.retry.Base, t.retry.Max, t.set.jitter), "backoff"
		if f.hasAfter {
			wait, reason = f.retryAfter, "retry_after"
		}
		if !fits(ctx, wait+took) {
			return nil, f.err
		}
		if err := t.wait(ctx, call, wait, reason); err != nil {
			return nil, err
		}
	}
}

// admit waits out the tool's and the host's rates and a pause the host
// asked for, when that leaves time for an attempt as long as the last one;
// otherwise it refuses at once with when to come back.
func (t *tool) admit(ctx context.Context, call *tools.Call, need time.Duration) error {
	now := t.set.now()
	wait, reason, code := t.host.paused(now), "retry_after", "upstream_rate_limited"
	var held []*rate.Reservation
	for _, l := range []*rate.Limiter{t.limiter, t.host.limiter} {
		if l == nil {
			continue
		}
		r := l.ReserveN(now, 1)
		held = append(held, r)
		if d := r.DelayFrom(now); d > wait {
			wait, reason, code = d, "rate_limit", "rate_limited"
		}
	}
	if wait <= 0 {
		return nil
	}
	if !fits(ctx, wait+need) {
		for _, r := range held {
			r.CancelAt(now)
		}
		t.set.metrics.refusals.WithLabelValues(t.spec.Name, code).Inc()
		msg := "toold's rate for this tool (or its API) allows the next request in %v"
		if code == "upstream_rate_limited" {
			msg = "the API asked toold to wait %v before calling it again"
		}
		return tools.Errorf(tools.OverloadError, msg+", longer than this call's deadline allows", wait.Round(time.Millisecond)).
			WithCode(code).WithSuggestion("call again after retry_after_ms").WithRetryAfter(min(wait, maxReportedRetryAfter))
	}
	return t.wait(ctx, call, wait, reason)
}

func (t *tool) wait(ctx context.Context, call *tools.Call, d time.Duration, reason string) error {
	call.CountWait(d)
	t.set.metrics.wait(t.spec.Name, reason, d)
	return t.set.sleep(ctx, d)
}

// fits reports whether d still fits before the deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// attempt sends the request once and reads the answer within the cap.
func (t *tool) attempt(ctx context.Context, b *built) (*answer, error) {
	if t.retry.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.retry.AttemptTimeout)
		defer cancel()
	}
	// The header is shared by the attempts: net/http only reads it (a
	// redirect copies it). With tracing on, each attempt is a client span
	// and carries its own traceparent, in a copy.
	header := b.header
	ctx, span := t.clientSpan(ctx, b)
	if span != nil {
		header = header.Clone()
		tracing.ToHeader(ctx, header)
	}
	req := (&http.Request{Method: b.method, URL: b.url, Host: b.url.Host, Header: header,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}).WithContext(ctx)
	if b.body != nil {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b.body)), int64(len(b.body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.body)), nil }
	}
	resp, err := t.client.Do(req)
	if err != nil {
		tracing.End(span, true, "transport")
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxBytes)+1))
	// A client span fails on 4xx and 5xx, as the HTTP conventions say.
	tracing.End(span, err != nil || resp.StatusCode >= 400, strconv.Itoa(resp.StatusCode), semconv.HTTPResponseStatusCode(resp.StatusCode))
	if err != nil {
		return nil, err
	}
	ans := &answer{status: resp.StatusCode, header: resp.Header, body: data}
	if t.scrub != nil {
		ans.body = []byte(t.scrub.Replace(string(data)))
	}
	return ans, nil
}

// clientSpan opens an attempt's span: "{method}" with the HTTP client
// conventions' attributes — the method, the server's address and port, the
// tool. Never the full URL: a template may have put an argument or a key
// in its query.
func (t *tool) clientSpan(ctx context.Context, b *built) (context.Context, trace.Span) {
	port, _ := strconv.Atoi(b.url.Port())
	if port == 0 {
		port = 80
		if b.url.Scheme == "https" {
			port = 443
		}
	}
	return tracing.StartClient(ctx, b.method, semconv.HTTPRequestMethodKey.String(b.method),
		semconv.ServerAddress(b.url.Hostname()), semconv.ServerPort(port), tracing.GenAIToolName.String(t.spec.Name))
}

// classify decides what an attempt's outcome means; nil is success.
func (t *tool) classify(ctx context.Context, b *built, ans *answer, err error) *failure {
	if err != nil {
		return t.transportFailure(ctx, b, err)
	}
	if len(ans.body) > t.maxBytes {
		return &failure{err: tools.NewUserError("%s answered more than the tool's %d-byte cap", b.target, t.maxBytes).
			WithCode("response_too_large").
			WithSuggestion("ask for less: a narrower query, fewer results per page (the operator can raise response.max_bytes)")}
	}
	st := ans.status
	switch {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusTooManyRequests || (st == http.StatusForbidden && rateLimited(ans.header)):
		return t.rateLimited(b, ans)
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return &failure{err: tools.NewPermissionError("the API refused toold's credentials for this tool: %s answered %s",
			b.target, statusText(st)).WithCode("upstream_auth").
			WithSuggestion("this is for the operator, not the model: check the credential of the tool %q (its auth: section and the "+
				"environment variable it reads); calling again will not help", t.spec.Name)}
	case st == http.StatusRequestTimeout || st == http.StatusBadGateway || st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout:
		f := t.serverFailure(b, ans)
		f.retry = true
		f.retryAfter, f.hasAfter = parseRetryAfter(ans.header.Get("Retry-After"), t.set.now())
		return f
	case st >= 500:
		return t.serverFailure(b, ans)
	case st >= 400:
		return &failure{err: tools.NewUserError("the API refused the request: %s answered %s%s", b.target, statusText(st),
			apiMessage(ans)).WithCode("upstream_rejected").WithSuggestion("%s", clientSuggestion(st))}
	}
	return &failure{err: tools.Errorf(tools.SystemError, "%s answered %s, which the tool cannot use", b.target, statusText(st)).
		WithCode("upstream_error").WithSuggestion("the API did not answer as declared; the operator should check the tool's request")}
}

func (t *tool) rateLimited(b *built, ans *answer) *failure {
	after, ok := parseRetryAfter(ans.header.Get("Retry-After"), t.set.now())
	f := &failure{retry: true, retryAfter: after, hasAfter: ok}
	msg := fmt.Sprintf("the API is rate-limiting toold: %s answered %s", b.target, statusText(ans.status))
	hint := "call again after retry_after_ms"
	if ok {
		t.host.pause(t.set.now(), after)
		msg += fmt.Sprintf(" and asks to wait %v", after.Round(time.Second))
		if after > maxReportedRetryAfter {
			hint = "that is longer than anyone should wait for this tool: use another tool, or tell the operator"
		}
	} else {
		after = time.Second
	}
	f.err = tools.Errorf(tools.OverloadError, "%s", msg).WithCode("upstream_rate_limited").
		WithSuggestion("%s", hint).WithRetryAfter(min(after, maxReportedRetryAfter))
	return f
}

func (t *tool) serverFailure(b *built, ans *answer) *failure {
	e := tools.Errorf(tools.SystemError, "the API failed: %s answered %s%s", b.target, statusText(ans.status), apiMessage(ans)).
		WithCode("upstream_error").WithSuggestion("the API's own failure; call again later, or use another tool")
	e.Retryable = true
	return &failure{err: e}
}

// transportFailure: no answer at all. The guard's refusals and redirects
// elsewhere are final; a certificate that does not verify will not verify
// on retry; the call's own deadline or its caller leaving end the call;
// anything else (refused, reset, DNS, an attempt's own timeout) may pass.
func (t *tool) transportFailure(ctx context.Context, b *built, err error) *failure {
	if ctx.Err() != nil {
		return &failure{err: ctx.Err()}
	}
	msg := t.clean(rootCause(err))
	var redirect *redirectError
	var cert *tls.CertificateVerificationError
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return &failure{err: tools.NewSecurityError("toold refused to connect: %s", msg).WithCode("ssrf_refused").
			WithSuggestion("this is for the operator: if the destination is meant to be reached, add it to the tool's allow list")}
	case errors.As(err, &redirect):
		return &failure{err: tools.NewSecurityError("%s", redirect.Error()).WithCode("redirect_refused")}
	case errors.As(err, &cert):
		return &failure{err: tools.Errorf(tools.SystemError, "%s: the API's TLS certificate does not verify: %s", b.target, msg).
			WithCode("upstream_unreachable").Wrap(errors.New(msg))}
	}
	if errors.Is(err, context.DeadlineExceeded) { // the attempt's own timeout, not the call's
		msg = fmt.Sprintf("no answer within retry.attempt_timeout (%v)", t.retry.AttemptTimeout)
	}
	var op *net.OpError
	unsent := errors.As(err, &op) && op.Op == "dial"
	e := tools.Errorf(tools.SystemError, "%s could not be reached: %s", b.target, msg).WithCode("upstream_unreachable").
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
func (t *tool) clean(s string) string {
	if t.scrub == nil {
		return s
	}
	return t.scrub.Replace(s)
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
func (t *tool) result(ctx context.Context, b *built, ans *answer) (any, error) {
	var v any
	switch {
	case t.format == "text":
		v = string(ans.body)
	case len(bytes.TrimSpace(ans.body)) == 0:
		v = nil
	case t.jq == nil && jsontext.Value(ans.body).IsValid():
		// Valid (one value, UTF-8, no duplicate names): the answer is
		// the result as it is, not decoded only to be encoded again.
		return json.RawMessage(ans.body), nil
	default:
		var err error
		if v, err = strictjson.Decode(ans.body, 128); err != nil {
			return nil, tools.Errorf(tools.SystemError, "%s answered %s that is not JSON: %v%s", b.target,
				contentType(ans.header), err, snippet(ans.body)).WithCode("invalid_output").
				WithSuggestion("the API did not answer as declared; call again later, or use another tool")
		}
	}
	if t.jq == nil {
		return v, nil
	}
	return t.shape(ctx, b, v)
}

// shape runs the jq expression: one output is the result, several an
// array, none null.
func (t *tool) shape(ctx context.Context, b *built, v any) (any, error) {
	var out []any
	iter := t.jq.RunWithContext(ctx, v)
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
				t.clean(err.Error())).WithCode("invalid_output").
				WithSuggestion("the API's answer changed shape; the operator should check response.jq")
		}
		if out = append(out, x); len(out) > 100000 {
			return nil, tools.Errorf(tools.SystemError, "the tool's jq expression produced more than 100000 values").
				WithCode("invalid_output")
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
