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
