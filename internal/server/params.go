package server

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toold/toold/internal/tools"
)

// The parsers of untrusted headers and query parameters of the execution
// routes. Each is strict and bounded, and answers a problem with a
// validation_error that names the header or parameter and how to fix it.

// preference is what a Prefer header (RFC 7240) asks of toold.
type preference struct {
	async bool
	// wait, when positive, is how long the client will wait for a final
	// answer before it wants the 202 (RFC 7240 §4.3).
	wait time.Duration
}

// maxPreferBytes bounds a Prefer header; real ones are a few words.
const maxPreferBytes = 1024

// parsePrefer reads every Prefer header: comma-separated preferences, each
// a token with an optional =value and ;parameters. respond-async and wait
// are understood; other well-formed preferences are ignored, as the RFC
// asks; a malformed header is refused rather than guessed at.
func parsePrefer(values []string, maxWait time.Duration) (preference, *tools.Error) {
	var p preference
	total := 0
	for _, v := range values {
		total += len(v)
		if total > maxPreferBytes {
			return p, badHeader("Prefer", "is longer than 1024 bytes", "send only respond-async and wait=<seconds>")
		}
		for _, item := range splitOutsideQuotes(v, ',') {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			first, _, _ := strings.Cut(item, ";") // parameters of a preference: none matter here
			name, value, hasValue := strings.Cut(strings.TrimSpace(first), "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if !isToken(name) || hasValue && !isToken(value) && !isQuoted(value) {
				return p, badHeader("Prefer", "is not a list of preferences (token[=value], ...)", "send, for example, Prefer: respond-async, wait=10")
			}
			switch strings.ToLower(name) {
			case "respond-async":
				if hasValue {
					return p, badHeader("Prefer", "respond-async takes no value", "send Prefer: respond-async")
				}
				p.async = true
			case "wait":
				secs, err := strconv.ParseUint(value, 10, 32)
				if err != nil || value == "" {
					return p, badHeader("Prefer", "wait must be a whole number of seconds", "send, for example, Prefer: respond-async, wait=10")
				}
				if d := time.Duration(secs) * time.Second; d > maxWait {
					return p, badHeader("Prefer", "wait="+value+" is beyond the longest wait, "+maxWait.String(),
						"ask for at most wait="+strconv.Itoa(int(maxWait.Seconds())))
				} else {
					p.wait = d
				}
			}
		}
	}
	return p, nil
}

func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"' && (i == 0 || s[i-1] != '\\'):
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func isQuoted(s string) bool {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '"' && s[i-1] != '\\' {
			return false
		}
	}
	return true
}

// MaxIdempotencyKey is the longest Idempotency-Key accepted.
const MaxIdempotencyKey = 255

// parseIdempotencyKey reads the Idempotency-Key header: the draft's
// structured-field string ("..."), or the same characters unquoted, 1 to
// 255 of them, printable ASCII. Empty (absent) means no key.
func parseIdempotencyKey(r *http.Request) (string, *tools.Error) {
	vs := r.Header.Values("Idempotency-Key")
	if len(vs) == 0 {
		return "", nil
	}
	if len(vs) > 1 {
		return "", badHeader("Idempotency-Key", "was sent more than once", "send one key per request")
	}
	k := strings.TrimSpace(vs[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	switch {
	case k == "":
		return "", badHeader("Idempotency-Key", "is empty", "send a unique key per request, such as a UUID")
	case len(k) > MaxIdempotencyKey:
		return "", badHeader("Idempotency-Key", "is "+strconv.Itoa(len(k))+" characters long; at most 255 are accepted",
			"send a shorter unique key, such as a UUID")
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", badHeader("Idempotency-Key", "may hold only printable ASCII without quotes or backslashes", "send a UUID or another simple token")
		}
	}
	return k, nil
}

// parseTurn reads Toold-Turn: 1-128 characters of [A-Za-z0-9._:-], like a
// request id.
func parseTurn(r *http.Request) (string, *tools.Error) {
	v := r.Header.Get("Toold-Turn")
	if v == "" {
		return "", nil
	}
	if !validRequestID(v) {
		return "", badHeader("Toold-Turn", "must be 1-128 characters of letters, digits and . _ : -",
			"send the id of the conversation turn, such as turn-42")
	}
	return v, nil
}

// parseWait reads ?wait=: a Go duration ("30s", "500ms") or whole seconds,
// at most max.
func parseWait(v string, max time.Duration) (time.Duration, *tools.Error) {
	if v == "" {
		return 0, nil
	}
	d, err := parseDuration(v, time.Second)
	switch {
	case err != nil || d < 0 || len(v) > 32:
		return 0, badParam("wait", "is not a duration", "use, for example, ?wait=30s")
	case d > max:
		return 0, badParam("wait", v+" is beyond the longest wait, "+max.String(), "ask for at most ?wait="+max.String()+", and ask again if it is not done")
	}
	return d, nil
}

// parseDuration reads a Go duration ("30s", "500ms") or a whole number of
// unit, refusing one that overflows a time.Duration.
func parseDuration(v string, unit time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil {
		return d, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && (n < 0 || n > int64(math.MaxInt64/unit)) {
		err = strconv.ErrRange
	}
	return time.Duration(n) * unit, err
}

// parseLimit reads ?limit= for listings: 1 to 100, default 20.
func parseLimit(v string) (int, *tools.Error) {
	if v == "" {
		return 20, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 || len(v) > 3 {
		return 0, badParam("limit", "must be a whole number from 1 to 100", "use, for example, ?limit=50")
	}
	return n, nil
}

func badHeader(name, problem, fix string) *tools.Error {
	return tools.Errorf(tools.ValidationError, "the %s header %s", name, problem).WithCode(tools.CodeInvalidHeader).WithSuggestion("%s", fix)
}

func badParam(name, problem, fix string) *tools.Error {
	return tools.Errorf(tools.ValidationError, "the query parameter %s %s", name, problem).WithCode(tools.CodeInvalidParameter).WithSuggestion("%s", fix)
}
