//go:build linux || darwin

package launch

import (
	"math"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRlimitsThroughTheShimArgument: the limits a macOS run's shim sets
// are the ones toold listed — encoded into one argument and read back
// unchanged, unlimited included — and a malformed argument is refused
// whole, not read in part.
func TestRlimitsThroughTheShimArgument(t *testing.T) {
	limits := Rlimits{CPU: 1_500_000_000, AddressSpace: 1 << 30, FileSize: -1, OpenFiles: 64, Processes: 32}.listFor(hostRlimits, true)
	limits = append(limits, rlimit{resource: 7, cur: math.MaxUint64, max: math.MaxUint64})
	got, err := parseRlimits(encodeShimRlimits(limits, false))
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
	// With headroom the process-count limit is relative (macOS): "+" on
	// both limits, read back as relative; the others stay absolute.
	rel, err := parseRlimits(encodeShimRlimits(limits, true))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rel {
		if r.relative != (limits[i].name == "RLIMIT_NPROC") || r.cur != limits[i].cur {
			t.Errorf("with headroom: %+v from %+v", r, limits[i])
		}
	}
	for _, bad := range []string{"", "1:2", "1:2:3:4", "1:2:3,", "a:1:2", "1:-1:2", "1:2:3x", "1: 2:3", "99999999999:1:1",
		"1:18446744073709551616:1", "7:+1:2", "7:1:+2", "7:++1:+1", "+7:1:1"} {
		if got, err := parseRlimits(bad); err == nil {
			t.Errorf("parseRlimits(%q) = %v, want an error", bad, got)
		}
	}
}

// TestRlimitNumbersAreThisOS: the resource numbers of hostRlimits (and so
// of the table the golden tests build a Mac's argv with, on a Mac) are
// x/sys's for this OS.
func TestRlimitNumbersAreThisOS(t *testing.T) {
	got := [5]int{hostRlimits.cpu, hostRlimits.fsize, hostRlimits.nofile, hostRlimits.nproc, hostRlimits.as}
	want := [5]int{unix.RLIMIT_CPU, unix.RLIMIT_FSIZE, unix.RLIMIT_NOFILE, unix.RLIMIT_NPROC, unix.RLIMIT_AS}
	if got != want || hostRlimits.enforcesAS != limitsAddressSpace {
		t.Errorf("hostRlimits %+v, want numbers %v and RLIMIT_AS enforced %v", hostRlimits, want, limitsAddressSpace)
	}
}
