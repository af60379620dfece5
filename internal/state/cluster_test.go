package state_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// TestReplicatedReadsTheLastWrite: on a three-node cluster, what one
// replica writes another reads back at once, through another node. A KV
// get is answered by any of the stream's replicas (a direct get), and a
// follower that has not applied the last write yet answered "no such
// key": the waits harness saw an execution answered 202 read as missing
// by the waiter (404 for its Location), and resumptions waiting a second
// for a poll. Reads of a replicated bucket now ask the stream's leader.
func TestReplicatedReadsTheLastWrite(t *testing.T) {
	nodes := statetest.StartCluster(t)
	open := func(url, name string) *state.Store {
		st, err := state.Open(context.Background(), state.Options{URL: url, Name: name, Replicas: 3,
			EventsMaxBytes: 8 << 20, AuditMaxBytes: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(nodes[0].URL(), "a"), open(nodes[2].URL(), "b")
	ctx := context.Background()
	stale := 0
	for i := range 300 {
		key := "k." + strconv.Itoa(i)
		rev, err := a.Executions.Create(ctx, key, []byte("one"))
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := b.Executions.Get(ctx, key); err != nil || got != rev {
			stale++
		}
		if rev, err = a.Executions.Update(ctx, key, []byte("two"), rev); err != nil {
			t.Fatal(err)
		}
		if v, got, err := b.Executions.Get(ctx, key); err != nil || got != rev || string(v) != "two" {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("%d of 600 reads through another node missed the write just made", stale)
	}
}
