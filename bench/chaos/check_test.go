//go:build linux

package main

import (
	"strings"
	"testing"
	"time"
)

// TestFrozenCallMayTimeOut: a call in flight on a replica as it was
// paused past a direct tool's timeout may end timeout; one on another
// replica, or sent once it was paused, may not.
func TestFrozenCallMayTimeOut(t *testing.T) {
	pause := time.Date(2026, 11, 27, 12, 13, 13, 373e6, time.UTC)
	h := &harness{faults: []*fault{{name: "replica-kill", start: pause.Add(-time.Minute)},
		{name: "replica-paused", start: pause, end: pause.Add(6 * time.Second), paused: "r2"}}}
	timedOut := &answer{status: 200, env: envelope{Status: "timeout", Error: &struct{ Type, Code, Message string }{Code: "timeout"}}}
	for _, c := range []struct {
		name       string
		replica    string
		start, end time.Time
		violations int
	}{
		{"in flight on the paused replica", "r2", pause.Add(-6 * time.Millisecond), pause.Add(6 * time.Second), 0},
		{"on another replica", "r1", pause.Add(-6 * time.Millisecond), pause.Add(6 * time.Second), 1},
		{"queued, sent to another replica", "r1", pause.Add(-200 * time.Millisecond), pause.Add(6 * time.Second), 0},
		{"sent after the pause began", "r2", pause.Add(time.Millisecond), pause.Add(6 * time.Second), 1},
		{"ended before the pause", "r2", pause.Add(-time.Second), pause.Add(-time.Millisecond), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			kind := kindAsyncWait
			if strings.HasPrefix(c.name, "queued") {
				kind = kindAsync
			}
			o := &op{n: 1, kind: kind, replica: c.replica, start: c.start, end: c.end, a: timedOut}
			iv := &invariant{}
			checkOutcome(o, nil, iv, h.frozen(o))
			if len(iv.violations) != c.violations {
				t.Errorf("violations %q, want %d", iv.violations, c.violations)
			}
		})
	}
}

// TestDecisionTakenMustEnd: a decision taken — answered 200, or answered
// 503 and then refused as decided — must end its execution, an answer with
// the answer sent; one never taken is not held to an end.
func TestDecisionTakenMustEnd(t *testing.T) {
	ended := func(status, data string) *final {
		return &final{env: envelope{Status: status, Data: []byte(data)}}
	}
	for _, c := range []struct {
		name                      string
		applied, unknown, refused int
		f                         *final
		violations                int
	}{
		{"answered 200, ended with it", 1, 0, 1, ended("success", `{"answer":"a1"}`), 0},
		{"answered 200, never ended", 1, 0, 1, nil, 1},
		{"503 then refused: taken, never ended", 0, 1, 2, nil, 1},
		{"503 then refused, ended with it", 0, 1, 2, ended("success", `{"answer":"a1"}`), 0},
		{"503 then refused, ended with another answer", 0, 1, 2, ended("success", `{"answer":"a9"}`), 1},
		{"503 then refused, its wait expired", 0, 1, 1, ended("timeout", `null`), 0},
		{"refused only, never ended: not taken here", 0, 0, 2, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &op{n: 1, kind: kindAnswer, exec: "x", answered: "a1", a: &answer{status: 202},
				applied: c.applied, unknown: c.unknown, refused: c.refused}
			iv := &invariant{}
			checkDecision(o, c.f, 0, iv)
			if len(iv.violations) != c.violations {
				t.Errorf("violations %q, want %d", iv.violations, c.violations)
			}
		})
	}
}
