package state_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state/statetest"
)

// TestReadSince: a read from a time gets the messages stored from then to
// the stream's end as the read began, in order, and ends there — also
// when nothing is that recent, and across more messages than one fetch
// holds.
func TestReadSince(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	ctx := context.Background()
	put := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := st.Executions.Put(ctx, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 3)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	put(3, 603)
	read := func(since time.Time) []string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var got []string
		if err := st.ReadSince(rctx, st.Executions.Stream(), since, func(m jetstream.Msg) bool {
			got = append(got, string(m.Data()))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tt := range []struct {
		name        string
		since       time.Time
		first, last string
		n           int
	}{
		{"from the start", time.Time{}, "0", "602", 603},
		{"from a time", mid, "3", "602", 600},
		{"nothing that recent", time.Now().Add(time.Hour), "", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := read(tt.since)
			if len(got) != tt.n || (tt.n > 0 && (got[0] != tt.first || got[len(got)-1] != tt.last)) {
				t.Fatalf("read %d messages (%.3v … %.3v), want %d from %q to %q", len(got), got, got[max(0, len(got)-3):], tt.n, tt.first, tt.last)
			}
		})
	}
	t.Run("stopped early", func(t *testing.T) {
		n := 0
		if err := st.ReadSince(ctx, st.Executions.Stream(), time.Time{}, func(jetstream.Msg) bool { n++; return n < 5 }); err != nil || n != 5 {
			t.Fatalf("read %d (%v), want 5", n, err)
		}
	})
}
