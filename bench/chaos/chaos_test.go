//go:build linux

package main

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"
)

// toold builds ./cmd/toold once for the schedules of this test binary,
// in a directory removed when the tests end (TestMain).
var toold = struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}{}

func tooldBinary(t *testing.T) string {
	t.Helper()
	toold.once.Do(func() {
		if toold.dir, toold.err = os.MkdirTemp("", "toold-chaos-bin-"); toold.err == nil {
			toold.bin, toold.err = buildToold(toold.dir)
		}
	})
	if toold.err != nil {
		t.Fatal(toold.err)
	}
	return toold.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if toold.dir != "" {
		os.RemoveAll(toold.dir)
	}
	os.Exit(code)
}

// TestShortSchedule is the CI-sized run of the harness (about a minute):
// the real cluster and replicas under the mixed load, one replica killed
// and one NATS node killed. It fails if any invariant breaks, and prints
// the tables either way.
func TestShortSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos harness starts a NATS cluster and two toold replicas: not in -short")
	}
	schedule(t, options{schedule: "short", replicas: 2, workers: 8, calm: 3 * time.Second, bin: tooldBinary(t)})
}

// TestOverlapSchedule is issue 38's run (overlap.go), once: a replica and
// a NATS node killed together under async calls, the node back, another
// node lost while it catches up, and every accepted execution read on
// the other replica until final. It failed on 3 of 5 runs before reads
// rode out the store (16 executions that had ended success read as
// "rejected, store_unavailable").
func TestOverlapSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos harness starts a NATS cluster and two toold replicas: not in -short")
	}
	schedule(t, options{schedule: "overlap", replicas: 2, workers: 8, calm: 2 * time.Second, bin: tooldBinary(t)})
}

func schedule(t *testing.T, o options) {
	t.Helper()
	var out bytes.Buffer
	res, err := run(o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.ok() {
		t.Fatal("an invariant broke: see the table above")
	}
}
