package events

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/state"

	"github.com/toold/toold/internal/state/statetest"
)

// TestChainContention: a replica whose view of the audit chain's tail is
// stale (another appended since) reloads it and chains after the other's
// records; that contention is not a store error.
func TestChainContention(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := statetest.Open(t, reg, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := newChain(Options{Store: st, Logger: zap.NewNop()}), newChain(Options{Store: st, Logger: zap.NewNop()})
	if err := b.load(ctx); err != nil {
		t.Fatal(err)
	}
	rec := func(caller string) []Record {
		return []Record{{Time: time.Now().UTC(), Replica: "r", Kind: "call", Caller: caller, Action: "execute"}}
	}
	if err := a.append(ctx, rec("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.append(ctx, rec("b")); err != nil {
		t.Fatalf("append after another replica's: %v", err)
	}
	if b.head.Seq != 2 || b.head.Prev != a.head.Hash {
		t.Errorf("b did not chain after a: %+v after %+v", b.head, a.head)
	}
	if n := testutil.CollectAndCount(reg, "toold_store_errors_total"); n != 0 {
		t.Errorf("contention counted as %d store error series", n)
	}
}

// TestChainSeesTruncation: a replica that finds the log ending before a
// record it wrote itself says so at once (and goes on appending).
func TestChainSeesTruncation(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	core, logs := observer.New(zap.ErrorLevel)
	c := newChain(Options{Store: st, Logger: zap.New(core)})
	rec := func() []Record {
		return []Record{{Time: time.Now().UTC(), Replica: "r", Kind: "call", Caller: "k", Action: "execute"}}
	}
	for range 3 {
		if err := c.append(ctx, rec()); err != nil {
			t.Fatal(err)
		}
	}
	var first []byte
	ReadAudit(ctx, st, ID{}, func(_ ID, line []byte) bool { first = append([]byte{}, line...); return false })
	statetest.ReplaceStream(t, st, state.AuditStream, state.AuditSubject, [][]byte{first})
	c.loaded = false // as after another replica's append
	if err := c.append(ctx, rec()); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessageSnippet("truncated").Len(); n != 1 {
		t.Errorf("%d truncation errors logged, want 1", n)
	}
}
