package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/itchyny/gojq"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// Client makes the requests of one declared endpoint (a ToolConfig),
// with everything an HTTP tool's call has: the SSRF guard, the tool's and
// the host's rates, the host's breaker and Retry-After pauses (shared with
// every client of the same host), retries with backoff inside the one
// deadline, credential scrubbing, and the upstream metrics under the
// declaration's name. It is the one way a declared API is called: each
// HTTP tool calls its Client, and a consultation provider asks a model API
// through one made with Set.Client.
type Client struct {
	set        *Set
	name       string
	req        *request
	http       *http.Client
	host       *host
	limiter    *rate.Limiter
	retry      RetryConfig
	idempotent bool // retried after a failure that may pass (else only when nothing was sent)
	format     string
	maxBytes   int
	jq         *gojq.Code
	defaults   map[string]any
	scrub      *strings.Replacer
	// conn is the tool's OAuth connection, token exchange or passthrough.
	conn *delegate.Connection
}

// Meter counts what a request did: every attempt (the first and each
// retry) and every wait before one (a backoff, a Retry-After, a rate
// limit). A tool's *tools.Call is one, so the envelope's timing shows them
// even while the request still runs; Tally is one for other callers.
type Meter interface {
	CountAttempt()
	CountWait(d time.Duration)
}

// Tally is a Meter that keeps the counts of one request.
type Tally struct {
	Attempts int
	Waited   time.Duration
}

// CountAttempt counts an attempt.
func (t *Tally) CountAttempt() { t.Attempts++ }

// CountWait adds a wait.
func (t *Tally) CountWait(d time.Duration) { t.Waited += d }

var _ Meter = (*Tally)(nil)

// Upstream reports the host's breaker, as discovery shows it.
func (c *Client) Upstream() tools.Upstream { return c.host.upstream() }

// Do builds the request from args (the declaration's parameters; their
// defaults are added to args), sends it — retrying what may be retried,
// within ctx's deadline — and shapes the answer: a json.RawMessage for a
// JSON answer as it came, what the jq expression made of it, a string for
// a text answer, nil for an empty one. Failures are *tools.Error with what
// the caller can do about them. m counts the attempts and waits.
func (c *Client) Do(ctx context.Context, args map[string]any, m Meter) (any, error) {
	// A null argument is kept: it is absent to the request, and takes no
	// default.
	tools.ApplyDefaults(args, c.defaults)
	b, err := c.req.build(args)
	if err != nil {
		return nil, err
	}
	if c.req.cred.perUser() {
		if err := c.authorize(ctx, b); err != nil {
			return nil, err
		}
	}
	ans, err := c.send(ctx, m, b)
	if err != nil {
		return nil, err
	}
	return c.result(ctx, b, ans)
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
func (c *Client) send(ctx context.Context, m Meter, b *built) (*answer, error) {
	var took time.Duration
	for n := 1; ; n++ {
		if err := c.admit(ctx, m, took); err != nil {
			return nil, err
		}
		done, err := c.host.breaker.Allow()
		if err != nil {
			c.set.metrics.refusals.WithLabelValues(c.name, "circuit_open").Inc()
			return nil, c.host.refusal(err)
		}
		m.CountAttempt()
		start := time.Now()
		ans, err := c.attempt(ctx, b)
		took = time.Since(start)
		if again, rerr := c.reauthorize(ctx, b, ans, err); again || rerr != nil {
			done(nil)
			c.set.metrics.attempt(c.name, c.host.name, outcome(ans), took)
			if rerr != nil {
				return nil, rerr
			}
			continue // once more, with the new credential
		}
		f := c.classify(ctx, b, ans, err)
		done(breakerVerdict(ctx, ans, err))
		c.set.metrics.attempt(c.name, c.host.name, outcome(ans), took)
		if f == nil {
			return ans, nil
		}
		if !f.retry || n >= c.retry.Attempts || !(c.idempotent || f.unsent) || ctx.Err() != nil {
			return nil, f.err
		}
		wait, reason := backoff(n, c.retry.Base, c.retry.Max, c.set.jitter), "backoff"
		if f.hasAfter {
			wait, reason = f.retryAfter, "retry_after"
		}
		if !fits(ctx, wait+took) {
			return nil, f.err
		}
		if err := c.wait(ctx, m, wait, reason); err != nil {
			return nil, err
		}
	}
}

// admit waits out the tool's and the host's rates and a pause the host
// asked for, when that leaves time for an attempt as long as the last one;
// otherwise it refuses at once with when to come back.
func (c *Client) admit(ctx context.Context, m Meter, need time.Duration) error {
	now := c.set.now()
	wait, reason, code := c.host.paused(now), "retry_after", tools.CodeUpstreamRateLimited
	var held []*rate.Reservation
	for _, l := range []*rate.Limiter{c.limiter, c.host.limiter} {
		if l == nil {
			continue
		}
		r := l.ReserveN(now, 1)
		held = append(held, r)
		if d := r.DelayFrom(now); d > wait {
			wait, reason, code = d, "rate_limit", tools.CodeRateLimited
		}
	}
	if wait <= 0 {
		return nil
	}
	if !fits(ctx, wait+need) {
		for _, r := range held {
			r.CancelAt(now)
		}
		c.set.metrics.refusals.WithLabelValues(c.name, string(code)).Inc()
		msg := "toold's rate for this tool (or its API) allows the next request in %v"
		if code == tools.CodeUpstreamRateLimited {
			msg = "the API asked toold to wait %v before calling it again"
		}
		return tools.Errorf(tools.OverloadError, msg+", longer than this call's deadline allows", wait.Round(time.Millisecond)).
			WithCode(code).WithSuggestion("call again after retry_after_ms").WithRetryAfter(min(wait, maxReportedRetryAfter))
	}
	return c.wait(ctx, m, wait, reason)
}

func (c *Client) wait(ctx context.Context, m Meter, d time.Duration, reason string) error {
	m.CountWait(d)
	c.set.metrics.wait(c.name, reason, d)
	return c.set.sleep(ctx, d)
}

// fits reports whether d still fits before the deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// attempt sends the request once and reads the answer within the cap.
func (c *Client) attempt(ctx context.Context, b *built) (*answer, error) {
	if c.retry.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.retry.AttemptTimeout)
		defer cancel()
	}
	// The header is shared by the attempts: net/http only reads it (a
	// redirect copies it). With tracing on, each attempt is a client span
	// and carries its own traceparent, in a copy.
	header := b.header
	ctx, span := c.clientSpan(ctx, b)
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
	resp, err := c.http.Do(req)
	if err != nil {
		tracing.End(span, true, "transport")
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxBytes)+1))
	// A client span fails on 4xx and 5xx, as the HTTP conventions say.
	tracing.End(span, err != nil || resp.StatusCode >= 400, strconv.Itoa(resp.StatusCode), semconv.HTTPResponseStatusCode(resp.StatusCode))
	if err != nil {
		return nil, err
	}
	ans := &answer{status: resp.StatusCode, header: resp.Header, body: data}
	if c.scrub != nil {
		ans.body = []byte(c.scrub.Replace(string(data)))
	}
	ans.body = scrubCall(ans.body, b.secrets)
	return ans, nil
}

// clientSpan opens an attempt's span: "{method}" with the HTTP client
// conventions' attributes — the method, the server's address and port, the
// tool. Never the full URL: a template may have put an argument or a key
// in its query.
func (c *Client) clientSpan(ctx context.Context, b *built) (context.Context, trace.Span) {
	port, _ := strconv.Atoi(b.url.Port())
	if port == 0 {
		port = 80
		if b.url.Scheme == "https" {
			port = 443
		}
	}
	return tracing.StartClient(ctx, b.method, semconv.HTTPRequestMethodKey.String(b.method),
		semconv.ServerAddress(b.url.Hostname()), semconv.ServerPort(port), tracing.GenAIToolName.String(c.name))
}
