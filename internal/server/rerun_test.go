package server

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/tools"
)

// effected counts its runs and claims effects.
type effected struct {
	name    string
	effects tools.Effects
	runs    *atomic.Int64
}

func (e effected) Spec() tools.Spec {
	return tools.Spec{Name: e.name, Description: "Counts its runs.", Category: tools.Direct, Effects: e.effects,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (e effected) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]int64{"run": e.runs.Add(1)}, nil
}

// TestLostKeyRunsAgainOnlyWhenItMay: a retry under an Idempotency-Key
// whose first request was lost with its replica runs the call again only
// when executions.MayRunAgain says so — each tool read-only or idempotent,
// the rule the worker follows for an execution lost with its replica
// (TestLostReplica) — and is answered interrupted otherwise. A batch under
// a key used to be answered interrupted whatever its tools (no rule but
// "never"), while the same batch lost as an execution ran again.
func TestLostKeyRunsAgainOnlyWhenItMay(t *testing.T) {
	runs := &atomic.Int64{}
	ts := []tools.Tool{
		effected{"reads", tools.Effects{ReadOnly: true}, runs},
		effected{"repeats", tools.Effects{Idempotent: true}, runs},
		effected{"writes", tools.Effects{Destructive: true}, runs},
	}
	h := newHarness(t, harnessOpts{keys: roleKeys, store: true, tools: append(testTools(), ts...)})
	ctx := context.Background()
	for _, c := range []struct {
		name, mode, path, body string
		tools                  []string
		again                  bool
	}{
		{"read-only alone", "sync", "/tools/reads/execute", `{}`, []string{"reads"}, true},
		{"idempotent alone", "sync", "/tools/repeats/execute", `{}`, []string{"repeats"}, true},
		{"neither", "sync", "/tools/writes/execute", `{}`, []string{"writes"}, false},
		{"a batch of read-only and idempotent tools", "batch", "/batch",
			`{"calls":[{"id":"a","tool":"reads"},{"id":"b","tool":"repeats"}]}`, []string{"reads", "repeats"}, true},
		{"a batch with one that may not", "batch", "/batch",
			`{"calls":[{"id":"a","tool":"reads"},{"id":"b","tool":"writes"}]}`, []string{"reads", "writes"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := executions.MayRunAgain(h.srv.opts.Dispatcher.Registry(), c.tools...); got != c.again {
				t.Fatalf("MayRunAgain(%v) = %v", c.tools, got)
			}
			key := "lost-" + c.tools[len(c.tools)-1] + c.mode
			tool := ""
			if c.mode == "sync" {
				tool = c.tools[0]
			}
			fp := executions.Fingerprint(c.mode, tool, []byte(c.body))
			if _, _, err := h.ex.Begin(ctx, executions.IdempotencyScope("alice"), key, fp, "the-lost-request", 50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // past its lease: its replica is gone
			before := runs.Load()
			r := h.do("POST", c.path, []byte(c.body), hdr("Idempotency-Key", key))
			ran := runs.Load() - before
			if c.again {
				if r.status != 200 || ran != int64(len(c.tools)) {
					t.Fatalf("ran again: %d %s (runs %d)", r.status, r.body, ran)
				}
				return
			}
			if r.status != 500 || r.env.Status != dispatch.StatusInterrupted || r.env.Error.Code != "interrupted" || ran != 0 {
				t.Fatalf("not run again: %d %s (runs %d)", r.status, r.body, ran)
			}
		})
	}
}
