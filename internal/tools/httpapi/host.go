package httpapi

import (
	"cmp"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/toold/toold/internal/tools"
)

// host is one upstream host (host[:port]) and what every tool calling it
// shares: its circuit breaker, its rate, and a pause the host asked for.
type host struct {
	name    string
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	cfg     BreakerConfig
	opened  atomic.Int64 // when the breaker last opened, unix nanoseconds
	limiter *rate.Limiter
	// pausedUntil is a Retry-After the host sent (unix nanoseconds): calls
	// before then are not sent, but waited out or refused.
	pausedUntil atomic.Int64
}

// Verdicts of one attempt for the breaker.
var (
	errAttemptFailed = errors.New("the upstream failed") // counts towards opening
	errNotCounted    = errors.New("not the upstream's fault")
)

func newHost(name string, hc HostConfig, defaults BreakerConfig) *host {
	b := BreakerConfig{Failures: cmp.Or(hc.Breaker.Failures, defaults.Failures, DefaultFailures),
		OpenFor: cmp.Or(hc.Breaker.OpenFor, defaults.OpenFor, DefaultOpenFor),
		Probes:  cmp.Or(hc.Breaker.Probes, defaults.Probes, DefaultProbes)}
	h := &host{name: name, cfg: b, limiter: newLimiter(hc.Rate)}
	h.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: uint32(b.Probes),
		Timeout:     b.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(b.Failures) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotCounted) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				h.opened.Store(time.Now().UnixNano())
			}
		},
	})
	return h
}

// newLimiter is a token bucket, or nil for no limit.
func newLimiter(rc RateConfig) *rate.Limiter {
	if rc.PerSecond <= 0 {
		return nil
	}
	burst := rc.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(rc.PerSecond)))
	}
	return rate.NewLimiter(rate.Limit(rc.PerSecond), burst)
}

// state is the breaker's state as discovery and metrics name it.
func (h *host) state() string {
	switch h.breaker.State() {
	case gobreaker.StateOpen:
		return "open"
	case gobreaker.StateHalfOpen:
		return "half_open"
	}
	return "closed"
}

// reopensIn is how long an open breaker still refuses.
func (h *host) reopensIn() time.Duration {
	return max(time.Until(time.Unix(0, h.opened.Load()).Add(h.cfg.OpenFor)), time.Millisecond)
}

// refusal is the answer while the breaker refuses: at once, with when to
// come back.
func (h *host) refusal(err error) *tools.Error {
	wait := h.reopensIn()
	msg := "the API at %s failed %d times in a row, so toold stops calling it for a while"
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		wait = time.Second
		msg = "the API at %s failed %d times in a row; toold is testing whether it is back"
	}
	return tools.Errorf(tools.OverloadError, msg, h.name, h.cfg.Failures).WithCode(tools.CodeCircuitOpen).
		WithSuggestion("call again after retry_after_ms, or use another tool").WithRetryAfter(wait)
}

// pause records a Retry-After the host sent, so calls before it ends are
// not sent. A pause never shortens one already set.
func (h *host) pause(now time.Time, d time.Duration) {
	until := now.Add(min(d, maxReportedRetryAfter)).UnixNano()
	for {
		cur := h.pausedUntil.Load()
		if cur >= until || h.pausedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// paused returns how long the host asked to be left alone from now.
func (h *host) paused(now time.Time) time.Duration {
	return max(time.Unix(0, h.pausedUntil.Load()).Sub(now), 0)
}

// Upstream reports the host for discovery.
func (h *host) upstream() tools.Upstream {
	u := tools.Upstream{Host: h.name, Breaker: h.state()}
	if u.Breaker == "open" {
		u.RetryAfter = h.reopensIn()
	}
	return u
}
