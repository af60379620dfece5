package state_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/confirm"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// TestSpentTokensAcrossReplicasAndRestart: a token spent on one replica is
// spent for the other, and for the first after it restarts on the same
// directory; of many replicas racing to spend one token, exactly one wins.
func TestSpentTokensAcrossReplicasAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := statetest.OpenPair(t, state.Options{})
	exp := time.Now().Add(confirm.DefaultTTL)
	if err := a.SpentTokens().Spend(ctx, "tok-1", exp, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.SpentTokens().Spend(ctx, "tok-1", exp, ""); !errors.Is(err, confirm.ErrUsed) {
		t.Errorf("spent on A, then on B: %v", err)
	}

	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		st := []*state.Store{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := st.SpentTokens().Spend(ctx, "raced", exp, ""); {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, confirm.ErrUsed):
				t.Errorf("spend: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d replicas spent one token", wins.Load())
	}

	dir := t.TempDir()
	st, err := state.Open(ctx, state.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SpentTokens().Spend(ctx, "tok-2", exp, ""); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = state.Open(ctx, state.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SpentTokens().Spend(ctx, "tok-2", exp, ""); !errors.Is(err, confirm.ErrUsed) {
		t.Errorf("spent, then again after a restart: %v", err)
	}
	if err := st.SpentTokens().Spend(ctx, "too-long", time.Now().Add(2*state.MaxTokenLife), ""); err == nil {
		t.Error("a token outliving the ledger's memory was accepted")
	}
}

// TestCreateTTLExpires: a key created with a TTL is gone after it, and
// can be created again (the bucket's limit marker is no obstacle).
func TestCreateTTLExpires(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket := st.Confirmations()
	if _, err := bucket.CreateTTL(ctx, "k", nil, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.CreateTTL(ctx, "k", nil, time.Second); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := bucket.CreateTTL(ctx, "k", nil, time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, state.ErrConflict) || time.Now().After(deadline) {
			t.Fatalf("the key never expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSpentByTheSameExecution: an async execution run again after its
// replica died presents the token it spent; it is still the one call the
// token confirmed. Another execution, or a plain call, is refused.
func TestSpentByTheSameExecution(t *testing.T) {
	a, b := statetest.OpenPair(t, state.Options{})
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	if err := a.SpentTokens().Spend(ctx, "tok-x", exp, "exec-1"); err != nil {
		t.Fatal(err)
	}
	if err := b.SpentTokens().Spend(ctx, "tok-x", exp, "exec-1"); err != nil {
		t.Errorf("the same execution, run again on another replica: %v", err)
	}
	for _, other := range []string{"exec-2", ""} {
		if err := b.SpentTokens().Spend(ctx, "tok-x", exp, other); !errors.Is(err, confirm.ErrUsed) {
			t.Errorf("spender %q after exec-1: %v", other, err)
		}
	}
}

// TestLeaderReadSeesRemovals: a read from the stream's leader (a
// replicated bucket's Get) takes a deleted key, and a key its TTL removed
// (the server's limit marker), as not found, never as an empty value.
func TestLeaderReadSeesRemovals(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket := st.LeaderReads(st.Confirmations())
	for _, k := range []string{"kept", "deleted"} {
		if _, err := bucket.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := bucket.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.CreateTTL(ctx, "expires", []byte("v"), time.Second); err != nil {
		t.Fatal(err)
	}
	if v, _, err := bucket.Get(ctx, "kept"); err != nil || string(v) != "v" {
		t.Fatalf("kept: %q %v", v, err)
	}
	if v, rev, err := bucket.Get(ctx, "deleted"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("deleted: %q at %d, %v; want not found", v, rev, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, rev, err := bucket.Get(ctx, "expires")
		if errors.Is(err, state.ErrNotFound) {
			break
		}
		if err != nil || string(v) != "v" || time.Now().After(deadline) {
			t.Fatalf("expired: %q at %d, %v; want the value, then not found", v, rev, err)
		}
	}
}
