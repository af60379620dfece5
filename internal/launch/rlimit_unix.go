//go:build linux || darwin

package launch

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// list turns the limits into rlimits (Linux: prlimit calls on the stopped
// child; macOS: the shim's setrlimit before its exec); -1 (unlimited)
// keeps toold's own limit, which an unprivileged toold could not raise
// anyway. procs says whether the process-count limit means anything (see
// Rlimits.Processes).
func (r Rlimits) list(procs bool) []rlimit {
	var out []rlimit
	add := func(name string, res int, soft, hard int64) {
		if soft >= 0 {
			out = append(out, rlimit{name, res, uint64(soft), uint64(hard)})
		}
	}
	cpu := int64(-1)
	if r.CPU > 0 {
		cpu = int64((r.CPU + 999_999_999) / 1_000_000_000) // whole seconds, rounded up
	}
	add("RLIMIT_CPU", unix.RLIMIT_CPU, cpu, cpu+1) // SIGXCPU first, SIGKILL a second later
	if limitsAddressSpace {
		add("RLIMIT_AS", unix.RLIMIT_AS, r.AddressSpace, r.AddressSpace)
	}
	add("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, r.FileSize, r.FileSize)
	add("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, int64(r.OpenFiles), int64(r.OpenFiles))
	if procs {
		add("RLIMIT_NPROC", unix.RLIMIT_NPROC, int64(r.Processes), int64(r.Processes))
	}
	return out
}

// encodeRlimits is rlimits as one argument of the shim (macOS):
// resource:soft:hard, comma-separated.
func encodeRlimits(limits []rlimit) string {
	parts := make([]string, len(limits))
	for i, r := range limits {
		parts[i] = fmt.Sprintf("%d:%d:%d", r.resource, r.cur, r.max)
	}
	return strings.Join(parts, ",")
}

// parseRlimits is encodeRlimits read back, strictly: three decimal
// numbers per item, nothing else (a malformed spec stops the shim before
// it runs anything).
func parseRlimits(s string) ([]rlimit, error) {
	var out []rlimit
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("rlimit %q: want resource:soft:hard", part)
		}
		res, err := strconv.ParseUint(f[0], 10, 31)
		if err != nil {
			return nil, fmt.Errorf("rlimit %q: resource: %w", part, err)
		}
		r := rlimit{resource: int(res)}
		if r.cur, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return nil, fmt.Errorf("rlimit %q: soft limit: %w", part, err)
		}
		if r.max, err = strconv.ParseUint(f[2], 10, 64); err != nil {
			return nil, fmt.Errorf("rlimit %q: hard limit: %w", part, err)
		}
		out = append(out, r)
	}
	return out, nil
}
