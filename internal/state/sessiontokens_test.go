package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// TestSessionTokensAcrossReplicas: a session's record put on one replica
// reads on the other, a later put replaces it there, each put carries the
// key's TTL (the session's end, so an abandoned session's record goes),
// and a delete is seen by both.
func TestSessionTokensAcrossReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := statetest.OpenPair(t, state.Options{})
	until := time.Now().Add(time.Hour)
	if err := a.SessionTokens().Put(ctx, "k1", "sealed-1", until); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.SessionTokens().Get(ctx, "k1"); err != nil || !ok || v != "sealed-1" {
		t.Fatalf("put on A, read on B: %q %v %v", v, ok, err)
	}
	if err := b.SessionTokens().Put(ctx, "k1", "sealed-2", until); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := a.SessionTokens().Get(ctx, "k1"); err != nil || !ok || v != "sealed-2" {
		t.Fatalf("replaced on B, read on A: %q %v %v", v, ok, err)
	}
	s, err := a.JetStream().Stream(ctx, "KV_"+state.SessionTokensBucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "$KV."+state.SessionTokensBucket+".k1")
	if err != nil {
		t.Fatal(err)
	}
	if ttl, err := time.ParseDuration(m.Header.Get("Nats-TTL")); err != nil || ttl < time.Hour || ttl > 2*time.Hour {
		t.Errorf("the record's TTL: %q (%v), want the session's remaining hour and the skew", m.Header.Get("Nats-TTL"), err)
	}
	if err := a.SessionTokens().Delete(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.SessionTokens().Get(ctx, "k1"); err != nil || ok {
		t.Errorf("deleted on A, still on B: %v %v", ok, err)
	}
	if err := b.SessionTokens().Delete(ctx, "never"); err != nil {
		t.Errorf("deleting a key never put: %v", err)
	}
}
