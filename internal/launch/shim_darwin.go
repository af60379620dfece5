package launch

import (
	"fmt"
	"os"
	"syscall"
)

// The rlimit shim (macOS). Go's os/exec has no hook between fork and exec,
// and setrlimit in toold would limit toold itself, so a run with rlimits
// starts toold's own binary as the shim: argv is shimArg0, the rlimits
// (encodeRlimits), "--", then the program's argv (under seatbelt,
// sandbox-exec's, which applies the profile and execs the program). The
// shim sets the limits and execs at once; they hold for the program and
// everything it starts. It costs a start of toold's binary per run (its
// runtime and package initialisation), measured on no Mac here.

// shimArg0 marks a shim run.
const shimArg0 = "toold-rlimits"

// Shim runs the rlimit shim, and never returns, when this process was
// started as one; otherwise it returns at once. cmd/toold's main calls it
// first, and so does every test binary that starts programs (TestMain).
func Shim() {
	if len(os.Args) > 3 && os.Args[0] == shimArg0 && os.Args[2] == "--" {
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
		if err := syscall.Setrlimit(r.resource, &syscall.Rlimit{Cur: r.cur, Max: r.max}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.resource, err)
		}
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}
