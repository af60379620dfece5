package events

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
	a, b := &chain{st: st}, &chain{st: st}
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
