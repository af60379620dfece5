package launch

import (
	"fmt"
	"strings"
)

// rlimitTable is what one OS's rlimits are: the resource numbers of its
// setrlimit, whether it enforces RLIMIT_AS, and whether the process-count
// limit of a run that shares toold's uid counts from the uid's processes
// at the run's start (headroom: macOS, where no cgroup or user namespace
// gives a run a count of its own). Each OS's files set hostRlimits; the
// platform golden tests give a Launcher darwinRlimits to build on Linux
// the argv a Mac gets. rlimit_unix_test.go checks the numbers against
// x/sys's on Linux and macOS.
type rlimitTable struct {
	cpu, fsize, nofile, nproc, as int
	enforcesAS, headroom, none    bool
}

var (
	linuxRlimits   = rlimitTable{cpu: 0, fsize: 1, nproc: 6, nofile: 7, as: 9, enforcesAS: true}
	darwinRlimits  = rlimitTable{cpu: 0, fsize: 1, nproc: 7, nofile: 8, as: 5, headroom: true}
	windowsRlimits = rlimitTable{none: true} // a Job Object's limits instead (job.go)
)

// listFor turns the limits into t's rlimits (Linux: prlimit calls on the
// stopped child; macOS: the shim's setrlimit before its exec); -1
// (unlimited) keeps toold's own limit, which an unprivileged toold could
// not raise anyway. procs says whether the process-count limit means
// anything (see Rlimits.Processes).
func (r Rlimits) listFor(t rlimitTable, procs bool) []rlimit {
	if t.none {
		return nil
	}
	var out []rlimit
	add := func(name string, res int, soft, hard int64) {
		if soft >= 0 {
			out = append(out, rlimit{name: name, resource: res, cur: uint64(soft), max: uint64(hard)})
		}
	}
	cpu := int64(-1)
	if r.CPU > 0 {
		cpu = int64((r.CPU + 999_999_999) / 1_000_000_000) // whole seconds, rounded up
	}
	add("RLIMIT_CPU", t.cpu, cpu, cpu+1) // SIGXCPU first, SIGKILL a second later
	if t.enforcesAS {
		add("RLIMIT_AS", t.as, r.AddressSpace, r.AddressSpace)
	}
	add("RLIMIT_FSIZE", t.fsize, r.FileSize, r.FileSize)
	add("RLIMIT_NOFILE", t.nofile, int64(r.OpenFiles), int64(r.OpenFiles))
	if procs {
		add("RLIMIT_NPROC", t.nproc, int64(r.Processes), int64(r.Processes))
	}
	return out
}

// encodeShimRlimits is rlimits as one argument of the macOS shim:
// resource:soft:hard, comma-separated. With headroom the process-count
// limit is written +soft:+hard: the shim adds the number of processes its
// uid has when it starts (parseRlimits, runShim).
func encodeShimRlimits(limits []rlimit, headroom bool) string {
	parts := make([]string, len(limits))
	for i, r := range limits {
		if headroom && r.name == "RLIMIT_NPROC" {
			parts[i] = fmt.Sprintf("%d:+%d:+%d", r.resource, r.cur, r.max)
			continue
		}
		parts[i] = fmt.Sprintf("%d:%d:%d", r.resource, r.cur, r.max)
	}
	return strings.Join(parts, ",")
}
