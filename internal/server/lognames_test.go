package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tracing"
	"github.com/toold/toold/internal/tracing/tracingtest"
)

// TestUnknownToolNamesAreNotLogged (issue 38, item 3): a name no tool has
// is caller input — here a token pasted where a tool's name goes — and no
// log line, span, activity event or audit record writes it: each names it
// "tool_unknown" with its length and a hash. A tool that exists is logged
// by its name. Every way a caller names a tool is tried: the execute,
// describe and schema routes, an async submit, a batch, and a key that
// lacks a role reaching for an approval with the token as its id.
func TestUnknownToolNamesAreNotLogged(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ0123ab"
	spans := tracingtest.New(t, nil)
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys, tracer: spans.Tracer(), mcp: true})
	redacted := registry.UnknownName(secret)
	if !strings.HasPrefix(redacted, "tool_unknown(len=40,sha256=") || strings.Contains(redacted, "ghp_") {
		t.Fatalf("the redacted form: %s", redacted)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/tools/" + secret + "/execute", `{}`},
		{"GET", "/tools/" + secret, ""},
		{"GET", "/tools/" + secret + "/schema", ""},
		{"POST", "/executions", `{"tool":"` + secret + `","arguments":{}}`},
		{"POST", "/batch", `{"calls":[{"tool":"` + secret + `","arguments":{}}]}`},
		{"POST", "/approvals/" + secret, `{"approve":true}`},
		{"POST", "/tools/echo/execute", `{"message":"known"}`},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		if r := h.do(c.method, c.path, body, hdr()); r.status == 0 || r.status >= 500 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	// The batch's refusal is an activity event and an audit record, written
	// off the hot path: wait for them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var activity []string
	events.Activity(ctx, h.st, events.Position{FromStart: true}, events.Filter{}, func(ev events.Event) bool {
		activity = append(activity, fmt.Sprintf("%+v", ev))
		return ev.Tool != "echo"
	})
	audit := h.do("GET", "/audit?limit=100", nil, bearer(keyAdmin))

	accessTools := map[string]bool{}
	for _, e := range h.logs.All() {
		line := fmt.Sprintf("%s %v", e.Message, e.ContextMap())
		if strings.Contains(line, secret) || strings.Contains(line, "ghp_") {
			t.Errorf("a log line holds the name as typed: %s", line)
		}
		if e.Message == "request" {
			accessTools[fmt.Sprint(e.ContextMap()["tool"])] = true
		}
	}
	if !accessTools[redacted] || !accessTools["echo"] {
		t.Errorf("the access log's tools: %v, want %s and echo", accessTools, redacted)
	}
	sawSpan := false
	for _, s := range spans.Spans() {
		line := fmt.Sprintf("%s %v", s.Name, s.Attributes)
		if strings.Contains(line, "ghp_") {
			t.Errorf("a span holds the name as typed: %s", line)
		}
		sawSpan = sawSpan || tracingtest.Attr(s, tracing.GenAIToolName) == redacted
	}
	if !sawSpan {
		t.Error("no span names the unknown tool in its redacted form")
	}
	joined := strings.Join(activity, "\n")
	if strings.Contains(joined, "ghp_") || !strings.Contains(joined, redacted) {
		t.Errorf("the activity stream:\n%s", joined)
	}
	if strings.Contains(string(audit.body), "ghp_") || !strings.Contains(string(audit.body), redacted) ||
		!strings.Contains(string(audit.body), "POST /approvals/{id}: the key lacks the approve role") {
		t.Errorf("the audit log: %d %s", audit.status, audit.body)
	}
}
