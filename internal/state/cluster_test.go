package state_test

import (
	"context"
	"strconv"
	"testing"
	"time"

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

// TestOpenWaitsForAClusterToForm: toold started beside a cluster whose
// last node is not up yet (deployed together; a node restarting) cannot
// place a three-replica bucket for a moment: the server refuses with "no
// suitable peers for placement". Open tries again within its connect
// timeout instead of failing start-up on the first refusal (CI saw it
// refused right after the cluster answered a probe: a peer the meta
// leader briefly took for offline).
func TestOpenWaitsForAClusterToForm(t *testing.T) {
	nodes, err := statetest.NewCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		t.Cleanup(n.Kill)
	}
	if err := statetest.StartAll(nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := statetest.WaitForJetStream(statetest.ClusterURL(nodes[:2]), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	late := make(chan error, 1)
	time.AfterFunc(time.Second, func() { late <- nodes[2].Start() })
	st, err := state.Open(context.Background(), state.Options{URL: nodes[0].URL(), Name: "a", Replicas: 3,
		EventsMaxBytes: 8 << 20, AuditMaxBytes: 8 << 20, ConnectTimeout: 20 * time.Second})
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("Open with the third node up a second later: %v", err)
	}
	defer st.Close()
	if _, err := st.Executions.Create(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}
