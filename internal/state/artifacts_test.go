package state_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

// artifactStore is the artifacts of an embedded store of its own, kept
// for retention and bounded to maxBytes in all.
func artifactStore(t *testing.T, retention time.Duration, maxBytes int64) *state.Artifacts {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), ArtifactsRetention: retention, ArtifactsMaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.Artifacts()
}

// TestArtifacts: an artifact is its owner's alone, read whole or from any
// offset, aged by the retention, and refused (ErrFull) past the store's
// bound rather than pushing older ones out.
func TestArtifacts(t *testing.T) {
	a := artifactStore(t, time.Hour, 1<<20)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 60_000) // 600 kB: five chunks
	expires, err := a.Put(ctx, "alice", "art_1", data)
	if err != nil || time.Until(expires) < 59*time.Minute || time.Until(expires) > time.Hour {
		t.Fatalf("put: %v, expires %v", err, expires)
	}
	r, err := a.Open(ctx, "alice", "art_1")
	if err != nil || r.Size() != int64(len(data)) {
		t.Fatalf("open: %v", err)
	}
	for _, off := range []int64{0, 1, 128<<10 - 1, 128 << 10, 599_990, 600_000} {
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data[off:]) {
			t.Errorf("from %d: %d bytes, %v", off, len(got), err)
		}
	}
	r.Close()
	if got, size, err := a.ReadRange(ctx, "alice", "art_1", 300_000, 7); err != nil || size != int64(len(data)) || string(got) != "0123456" {
		t.Errorf("a range: %q %d %v", got, size, err)
	}
	for _, c := range []struct{ owner, id string }{{"bob", "art_1"}, {"alice", "art_2"}, {"", "art_1"}} {
		if _, err := a.Open(ctx, c.owner, c.id); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("%s's %s: %v, want not found", c.owner, c.id, err)
		}
	}
	// A second 600 kB does not fit in 1 MiB: refused, the first kept.
	if _, err := a.Put(ctx, "bob", "art_3", data); !errors.Is(err, state.ErrFull) {
		t.Errorf("past the bound: %v, want ErrFull", err)
	}
	if _, err := a.Open(ctx, "alice", "art_1"); err != nil {
		t.Errorf("the first after a refused second: %v", err)
	}
}

// TestArtifactsFarReads: a read far into an artifact starts at the chunk
// that holds its offset (skipping the chunks before by their headers),
// and returns exactly the bytes from there — at chunk edges, at the edge
// of where reads switch to it, and in any order on one reader.
func TestArtifactsFarReads(t *testing.T) {
	a := artifactStore(t, time.Hour, 16<<20)
	ctx := context.Background()
	data := make([]byte, 3<<20+12345) // not a whole number of chunks
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if _, err := a.Put(ctx, "alice", "art_far", data); err != nil {
		t.Fatal(err)
	}
	const chunk = 128 << 10
	offs := []int64{512<<10 - 1, 512 << 10, 512<<10 + 1, 5*chunk - 1, 5 * chunk, 20*chunk + 7, int64(len(data)) - chunk, int64(len(data)) - 1}
	for _, off := range offs {
		got, size, err := a.ReadRange(ctx, "alice", "art_far", off, 1000)
		want := data[off:min(off+1000, int64(len(data)))]
		if err != nil || size != int64(len(data)) || !bytes.Equal(got, want) {
			t.Errorf("ReadRange(%d): %d bytes, %v; want the %d from there", off, len(got), err, len(want))
		}
	}
	r, err := a.Open(ctx, "alice", "art_far")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, off := range []int64{2 << 20, 600 << 10, 3 << 20, 0, 1 << 20} { // back and forth on one reader
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data[off:]) {
			t.Errorf("from %d: %d bytes, %v; want %d", off, len(got), err, len(data)-int(off))
		}
	}
	if got, _, err := a.ReadRange(ctx, "bob", "art_far", 2<<20, 10); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("another owner's far read: %d bytes, %v; want not found", len(got), err)
	}
}

// TestArtifactExpiresWhileOpen: an artifact that expires between Open and
// a read far into it is not found, at once, rather than waited for.
func TestArtifactExpiresWhileOpen(t *testing.T) {
	a := artifactStore(t, time.Second, 16<<20)
	ctx := context.Background()
	if _, err := a.Put(ctx, "alice", "art_short", bytes.Repeat([]byte("x"), 2<<20)); err != nil {
		t.Fatal(err)
	}
	r, err := a.Open(ctx, "alice", "art_short")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) { // until the store has aged it out
		if _, err := a.Open(ctx, "alice", "art_short"); errors.Is(err, state.ErrNotFound) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := r.Seek(1<<20, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a far read of an expired artifact: %v, want not found", err)
	}
}

// BenchmarkArtifacts: keeping a 5 MB result whole, reading it whole, and
// reading a 64 KiB part of it from near its start and from deep inside
// (a ranged GET: from 512 KiB on, the read starts at the offset's chunk).
func BenchmarkArtifacts(b *testing.B) {
	st, err := state.Open(context.Background(), state.Options{Dir: b.TempDir(), ArtifactsMaxBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	a := st.Artifacts()
	data := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	b.Run("put_5MB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; b.Loop(); i++ {
			if _, err := a.Put(ctx, "bench", "art_put_"+strconv.Itoa(i), data); err != nil {
				b.Fatal(err)
			}
		}
	})
	if _, err := a.Put(ctx, "bench", "art_read", data); err != nil {
		b.Fatal(err)
	}
	b.Run("range_64KiB_at_256KiB", func(b *testing.B) {
		for b.Loop() {
			if got, _, err := a.ReadRange(ctx, "bench", "art_read", 256<<10, 64<<10); err != nil || len(got) != 64<<10 {
				b.Fatal(err)
			}
		}
	})
	b.Run("range_64KiB_at_4MB", func(b *testing.B) {
		for b.Loop() {
			if got, _, err := a.ReadRange(ctx, "bench", "art_read", 4<<20, 64<<10); err != nil || len(got) != 64<<10 {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole_5MB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if got, _, err := a.ReadRange(ctx, "bench", "art_read", 0, int64(len(data))); err != nil || len(got) != len(data) {
				b.Fatal(err)
			}
		}
	})
}

// TestArtifactsWithoutRoom: a cluster whose nodes cannot reserve the
// artifacts' default bound (max_file_store set before toold kept
// artifacts) still serves, without artifacts; a bound the operator chose
// and the cluster cannot hold fails the start, naming the store.
func TestArtifactsWithoutRoom(t *testing.T) {
	nodes, err := statetest.NewCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n.MaxStore = 64 << 20
		t.Cleanup(n.Kill)
	}
	if err := statetest.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	url := statetest.ClusterURL(nodes)
	if err := statetest.WaitForJetStream(url, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	open := func(artifacts int64) (*state.Store, error) {
		st, err := state.Open(context.Background(), state.Options{URL: url, Name: "small", Replicas: 3,
			EventsMaxBytes: 8 << 20, AuditMaxBytes: 8 << 20, ArtifactsMaxBytes: artifacts, ConnectTimeout: 20 * time.Second})
		if err == nil {
			t.Cleanup(func() { st.Close() })
		}
		return st, err
	}
	if st, err := open(0); err != nil || st.Artifacts() != nil {
		t.Fatalf("the default bound, without room: %v (artifacts %v)", err, st)
	}
	if _, err := open(256 << 20); err == nil || !strings.Contains(err.Error(), state.ArtifactsBucket) {
		t.Errorf("a bound the operator chose, without room: %v", err)
	}
	if st, err := open(8 << 20); err != nil || st.Artifacts() == nil {
		t.Errorf("a bound that fits: %v", err)
	}
}
