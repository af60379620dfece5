package launch

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// The rlimit shim (macOS). Go's os/exec has no hook between fork and exec,
// and setrlimit in toold would limit toold itself, so a run with rlimits
// starts toold's own binary as the shim: argv is rlimitShimArg0 (seatbelt.go), the rlimits
// (encodeShimRlimits), "--", then the program's argv (under seatbelt,
// sandbox-exec's, which applies the profile and execs the program). The
// shim sets the limits and execs at once; they hold for the program and
// everything it starts. It costs a start of toold's binary per run (its
// runtime and package initialisation), measured on no Mac here.
//
// RLIMIT_NPROC counts every process of the uid on macOS, so when a run
// shares toold's uid (toold not root) its limit is relative ("+N"): the
// shim adds the uid's processes when it starts. The run may then grow by
// N processes at most (fewer if the user's own programs start meanwhile):
// a fork bomb stops there.

// Shim runs the rlimit shim, and never returns, when this process was
// started as one; otherwise it returns at once. cmd/toold's main calls it
// first, and so does every test binary that starts programs (TestMain).
func Shim() {
	if len(os.Args) > 3 && os.Args[0] == rlimitShimArg0 && os.Args[2] == "--" {
		err := runShim(os.Args[1], os.Args[3:])
		fmt.Fprintf(os.Stderr, "toold sandbox: %v\n", err)
		os.Exit(127)
	}
}

// runShim sets the rlimits and execs argv; it returns only on error.
// syscall.Setrlimit (not x/sys's) also tells the Go runtime not to put back
// the open-files limit it raised at its start.
func runShim(spec string, argv []string) error {
	limits, err := parseRlimits(spec)
	if err != nil {
		return err
	}
	for _, r := range limits {
		if r.relative {
			n, err := uidProcesses(os.Getuid())
			if err != nil {
				return fmt.Errorf("counting the uid's processes: %w", err)
			}
			r.cur, r.max = addCapped(r.cur, n), addCapped(r.max, n)
			// Never above the hard limit the uid has: raising it is root's.
			var old syscall.Rlimit
			if err := syscall.Getrlimit(r.resource, &old); err == nil {
				r.cur, r.max = min(r.cur, old.Max), min(r.max, old.Max)
			}
		}
		if err := syscall.Setrlimit(r.resource, &syscall.Rlimit{Cur: r.cur, Max: r.max}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.resource, err)
		}
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}

// addCapped is v+n, or the largest uint64 past it.
func addCapped(v uint64, n int) uint64 {
	if v > math.MaxUint64-uint64(n) {
		return math.MaxUint64
	}
	return v + uint64(n)
}
