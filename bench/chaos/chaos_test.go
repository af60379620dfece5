//go:build linux

package main

import (
	"bytes"
	"testing"
	"time"
)

// TestShortSchedule is the CI-sized run of the harness (about a minute):
// the real cluster and replicas under the mixed load, one replica killed
// and one NATS node killed. It fails if any invariant breaks, and prints
// the tables either way.
func TestShortSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos harness starts a NATS cluster and two toold replicas: not in -short")
	}
	var out bytes.Buffer
	res, err := run(options{schedule: "short", replicas: 2, workers: 8, calm: 3 * time.Second}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.ok() {
		t.Fatal("an invariant broke: see the table above")
	}
}
