package oauth

import (
	"strconv"
	"testing"
	"time"
)

// TestExpiringIsBounded: an in-process record ends each entry at its own
// time, and holds at most maxRevoked: when full, the ended entries make
// room; full of live ones, a new key is refused while a key it holds is
// still updated.
func TestExpiringIsBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	e := newExpiring[string](func() time.Time { return now })
	for i := range maxRevoked {
		until := now.Add(time.Hour)
		if i%2 == 0 {
			until = now.Add(time.Minute) // half end first
		}
		if !e.put(strconv.Itoa(i), "v", until) {
			t.Fatalf("put %d of %d refused", i, maxRevoked)
		}
	}
	if v, ok := e.get("0"); !ok || v != "v" {
		t.Fatalf("a live entry: %q %v", v, ok)
	}
	if e.put("new", "v", now.Add(time.Hour)) {
		t.Fatal("a new key past the bound, none ended, was kept")
	}
	if !e.put("1", "w", now.Add(time.Hour)) {
		t.Fatal("a key the record holds was not updated at the bound")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := e.get("0"); ok {
		t.Error("an ended entry is still returned")
	}
	if !e.put("new", "v", now.Add(time.Hour)) || len(e.m) != maxRevoked/2+1 {
		t.Errorf("the ended entries made no room: %d held", len(e.m))
	}
	if v, ok := e.get("1"); !ok || v != "w" {
		t.Errorf("the updated entry: %q %v", v, ok)
	}
	e.forget("1")
	if _, ok := e.get("1"); ok {
		t.Error("a forgotten key is still returned")
	}
}
