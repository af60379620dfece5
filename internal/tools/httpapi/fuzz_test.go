package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toold/toold/internal/tools"
)

// FuzzParseRetryAfter: any header reads as a wait that is not negative, or
// as unreadable; never a panic or an overflow.
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{"0", "120", "31536000", "99999999999999999999", "-1", "1.5", " 7 ",
		"Wed, 21 Oct 2026 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "soon", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		d, ok := parseRetryAfter(h, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("%q read as %v, %v", h, d, ok)
		}
	})
}

// FuzzUpstreamAnswer: whatever an API answers (status, content type,
// body), the tool turns it into a result or a typed error without a panic;
// messages are valid UTF-8 and bounded; the kind follows the status. The
// body is also sent as Retry-After, so a 403 with a body is a rate limit
// and one without is refused credentials.
func FuzzUpstreamAnswer(f *testing.F) {
	f.Add(200, "application/json", `{"a":[1,2,{"b":null}]}`)
	f.Add(200, "text/html", "<html>")
	f.Add(404, "application/json", `{"error":{"message":"gone"},"errors":[{"field":"q"}]}`)
	f.Add(429, "", "")
	f.Add(503, "text/plain", strings.Repeat("é", 400))
	f.Add(200, "application/json", "{\"a\":\"\xff\"}")
	f.Add(301, "application/json", `null`)
	f.Add(403, "application/json", "")                                   // refused credentials
	f.Add(403, "text/plain", "60")                                       // a rate limit that says when
	f.Add(403, "application/json", `{"message":"secondary rate limit"}`) // one that does not say readably
	s, err := tryBuild(nil, `
tools:
  - {name: t, description: T., request: {url: "https://api.example.com/x"}, response: {jq: '.. | numbers'}}
`)
	if err != nil {
		f.Fatal(err)
	}
	tl := s.Tools()[0].(*tool)
	b, err := tl.req.build(map[string]any{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, code int, ct, body string) {
		if code < 100 || code > 599 { // a seed's status is kept as written
			code = 100 + abs(code)%500
		}
		ans := &answer{status: code, header: http.Header{"Content-Type": {ct}, "Retry-After": {body}}, body: []byte(body)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var err error
		if fail := tl.classify(ctx, b, ans, nil); fail != nil {
			err = fail.err
		} else {
			_, err = tl.result(ctx, b, ans)
		}
		if err == nil {
			if code < 200 || code > 299 {
				t.Fatalf("%d accepted", code)
			}
			return
		}
		te, ok := tools.AsError(err)
		if !ok {
			t.Fatalf("untyped error %v", err)
		}
		if !utf8.ValidString(te.Message) || len(te.Message) > 2*maxMessage+200 {
			t.Fatalf("message %d bytes, valid %v: %q", len(te.Message), utf8.ValidString(te.Message), te.Message)
		}
		want := map[int]tools.Kind{2: tools.SystemError, 4: tools.UserError, 5: tools.SystemError}[code/100]
		switch {
		case code == 429 || (code == 403 && body != ""): // a 403 with Retry-After is a rate limit
			want = tools.OverloadError
		case code == 401 || code == 403:
			want = tools.PermissionError
		case code < 200 || (code >= 300 && code < 400) || code == 408: // 408: the API gave up waiting, like a 5xx
			want = tools.SystemError
		}
		if te.Kind != want {
			t.Fatalf("%d answered as %s: %v", code, te.Kind, te)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
