package httpapi

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// parseRetryAfter reads a Retry-After header (RFC 9110 §10.2.3): whole
// seconds, or an HTTP date, relative to now. A date in the past is zero.
// ok is false when the header is absent or unreadable; a reading too large
// to be a time.Duration is clamped, so "a year" (or a thousand) is a long
// wait, never an overflow.
func parseRetryAfter(h string, now time.Time) (d time.Duration, ok bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if h[0] >= '0' && h[0] <= '9' {
		n, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange {
				return maxDuration, true
			}
			return 0, false
		}
		if n > uint64(maxDuration/time.Second) {
			return maxDuration, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(h)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

const maxDuration = time.Duration(1<<63 - 1)

// backoff is the wait before retry n (1 for the first retry): exponential
// from base, capped at most, with full jitter (a uniform draw below the
// bound), so clients that failed together do not retry together.
func backoff(n int, base, most time.Duration, jitter func() float64) time.Duration {
	bound := base
	for i := 1; i < n && bound < most; i++ {
		bound *= 2
	}
	bound = min(bound, most)
	return time.Duration(jitter() * float64(bound))
}

// defaultJitter draws from [0, 1).
func defaultJitter() float64 { return rand.Float64() }
