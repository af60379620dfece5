//go:build linux || darwin

package launch

import (
	"math"
	"slices"
	"testing"
)

// TestRlimitsThroughTheShimArgument: the limits a macOS run's shim sets
// are the ones toold listed — encoded into one argument and read back
// unchanged, unlimited included — and a malformed argument is refused
// whole, not read in part.
func TestRlimitsThroughTheShimArgument(t *testing.T) {
	limits := Rlimits{CPU: 1_500_000_000, AddressSpace: 1 << 30, FileSize: -1, OpenFiles: 64, Processes: 32}.list(true)
	limits = append(limits, rlimit{resource: 7, cur: math.MaxUint64, max: math.MaxUint64})
	got, err := parseRlimits(encodeRlimits(limits))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]rlimit, len(limits))
	for i, r := range limits {
		r.name = "" // names stay with toold: the shim needs numbers
		want[i] = r
	}
	if !slices.Equal(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
	n := 4 // CPU, open files, processes, and the unlimited one added
	if limitsAddressSpace {
		n++
	}
	if len(want) != n || want[0].cur != 2 || want[0].max != 3 {
		t.Errorf("the listed limits: %v (CPU rounded up to 2 s, then SIGKILL at 3 s; the file size unlimited, left out)", want)
	}
	for _, bad := range []string{"", "1:2", "1:2:3:4", "1:2:3,", "a:1:2", "1:-1:2", "1:2:3x", "1: 2:3", "99999999999:1:1", "1:18446744073709551616:1"} {
		if got, err := parseRlimits(bad); err == nil {
			t.Errorf("parseRlimits(%q) = %v, want an error", bad, got)
		}
	}
}
