package httpapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/dispatch"
)

// echo answers with what it received: an API that echoes the request,
// credentials and all, as some do in errors and debug fields.
func echo(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"message": "you sent " + r.URL.String() + " with " + r.Header.Get("Authorization"),
			"url": r.URL.String(), "headers": r.Header, "query": r.URL.Query()})
	}
}

// TestCredentialsNeverShown: a credential echoed by the API, in a result,
// an error message, or the error of a connection that failed (whose URL
// holds a query credential), reaches neither the envelope nor the log,
// even at debug level; what the API needed still reached it.
func TestCredentialsNeverShown(t *testing.T) {
	const token, key = "s3cr3t/token+value", "k3y-Pa55=word&x"
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	u := newUpstream(t, echo(http.StatusOK))
	decl := func(url string) string {
		return `
breaker: {failures: 100}
tools:
  - name: bearer
    description: B.
    request: {url: "` + url + `/b"}
    auth: {bearer: "` + token + `"}
    allow: [127.0.0.1]
    allow_http: true
  - name: query
    description: Q.
    request: {url: "` + url + `/q"}
    auth: {query: {name: api_key, value: "` + key + `"}}
    allow: [127.0.0.1]
    allow_http: true
`
	}
	logged := func(o *dispatch.Options) { o.Logger, o.StuckAfter = log, time.Second }
	s, _, _ := build(t, u, decl(u.URL))
	d := pipeline(t, s, logged)
	for _, name := range []string{"bearer", "query"} {
		for _, code := range []int{http.StatusOK, http.StatusBadRequest, http.StatusInternalServerError} {
			u.set(echo(code))
			env := d.Execute(context.Background(), &dispatch.Request{Tool: name, Body: []byte(`{}`), RequestID: "leak"})
			out := string(env.AppendJSON(nil))
			if leaks(out, token, key) || !strings.Contains(out, redacted) {
				t.Errorf("%s %d: %s", name, code, out)
			}
		}
	}
	if r := u.last(t); !strings.Contains(r.Query, "api_key=k3y-Pa55%3Dword%26x") {
		t.Errorf("the API did not get the key: %s", r.Query)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := "http://" + ln.Addr().String()
	ln.Close()
	s, _, _ = build(t, nil, decl(gone))
	d = pipeline(t, s, logged)
	for _, name := range []string{"bearer", "query"} {
		env := d.Execute(context.Background(), &dispatch.Request{Tool: name, Body: []byte(`{}`), RequestID: "leak"})
		if out := string(env.AppendJSON(nil)); leaks(out, token, key) || env.Error == nil || env.Error.Code != "upstream_unreachable" {
			t.Errorf("%s unreachable: %s", name, out)
		}
	}
	for _, e := range logs.All() {
		line, _ := json.Marshal(e.ContextMap())
		if leaks(e.Message+string(line), token, key) {
			t.Errorf("the log carries a credential: %s %s", e.Message, line)
		}
	}
	if logs.Len() == 0 {
		t.Error("nothing was logged: the test proves nothing about logs")
	}
}

func leaks(s string, secrets ...string) bool {
	for _, sec := range secrets {
		for _, form := range []string{sec, strings.ReplaceAll(sec, "/", "%2F"), strings.NewReplacer("+", "%2B", "=", "%3D", "&", "%26", "/", "%2F").Replace(sec)} {
			if strings.Contains(s, form) {
				return true
			}
		}
	}
	return false
}
