package executions

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRecentEnds: a kept record is read back (a copy) by its caller only,
// within recentFor, and until recentMax later ends push it out; a large
// one is not kept.
func TestRecentEnds(t *testing.T) {
	var c recentEnds
	rec := func(i int) *Record { return &Record{ID: "x" + strconv.Itoa(i), Caller: "k", Status: "success"} }
	first := rec(0)
	c.put(first)
	got, ok := c.get("k", first.ID)
	if !ok || got == first || got.ID != first.ID || got.Status != first.Status {
		t.Fatalf("get = %+v, %v: want a copy of the record", got, ok)
	}
	if _, ok := c.get("other", first.ID); ok {
		t.Fatal("another caller read the record")
	}
	for i := 1; i < recentMax; i++ {
		c.put(rec(i))
	}
	if _, ok := c.get("k", first.ID); !ok {
		t.Fatalf("the first of %d ends is gone", recentMax)
	}
	c.put(rec(recentMax))
	if _, ok := c.get("k", first.ID); ok {
		t.Fatalf("the first end is kept past %d later ones", recentMax)
	}
	if len(c.byID) != recentMax {
		t.Fatalf("%d kept, want %d", len(c.byID), recentMax)
	}
	last := "x" + strconv.Itoa(recentMax)
	c.mu.Lock()
	e := c.byID[last]
	e.at = time.Now().Add(-recentFor - time.Second)
	c.byID[last] = e
	c.mu.Unlock()
	if _, ok := c.get("k", last); ok {
		t.Fatal("an end older than recentFor was read")
	}
	big := &Record{ID: "big", Caller: "k", Arguments: []byte(`"` + strings.Repeat("a", recentMaxBytes) + `"`)}
	c.put(big)
	if _, ok := c.get("k", "big"); ok {
		t.Fatal("a record past recentMaxBytes was kept")
	}
}
