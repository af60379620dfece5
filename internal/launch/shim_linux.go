package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Without root, the minimal root cannot be built on a launcher thread: a
// thread of a multi-threaded process cannot enter a user namespace. So the
// child of containment namespaces (not root) is cloned into new user,
// mount, PID, IPC, UTS and network namespaces running toold's own binary
// (/proc/self/exe) as a shim: Shim, which main calls before anything else
// of toold, builds the minimal root in the child's namespaces (the same
// code as the root launcher's), mounts its /tmp and paths, and execs the
// command.
// Rlimits were set on the shim while it was stopped after its execve, so
// the command inherits them. This costs a start of toold's binary per run
// (its runtime and package initialisation: 0.1–0.2 s on the loaded test
// machine), which only the unprivileged fallback pays: bwrap, which auto
// prefers without root, costs far less.

// shimArg0 marks a shim run: argv is shimArg0, the spec, "--", the command.
const shimArg0 = "toold-sandbox-init"

// shimSpec is what the shim is to set up.
type shimSpec struct {
	TmpSize int64    `json:"tmp_size"`
	Paths   []string `json:"paths"`
	RO      []bool   `json:"ro"`
	Dir     string   `json:"dir"`
	// AddressSpace is RLIMIT_AS, set by the shim itself just before the
	// exec: the Go runtime of the shim needs more address space than the
	// command may have.
	AddressSpace *unix.Rlimit `json:"address_space,omitempty"`
}

// Shim runs the sandbox shim, and never returns, when this process was
// started as one (argv[0] is toold-sandbox-init); otherwise it returns at
// once. A binary that starts programs through a Launcher calls it first
// thing in main: cmd/toold does, before its own hardening (harden.go): a
// shim holds nothing of toold's to protect and execs the command at once,
// so it is kept as short and plain as it can be. A test binary calls it
// from TestMain.
// A binary that does not call it cannot use containment namespaces
// without root: the launcher's probe of the mode then fails at start-up
// with the binary's own output as the reason.
func Shim() {
	if len(os.Args) > 3 && os.Args[0] == shimArg0 && os.Args[2] == "--" {
		err := runShim(os.Args[1], os.Args[3:])
		fmt.Fprintf(os.Stderr, "toold sandbox: %v\n", err)
		os.Exit(127)
	}
}

// runShim sets up the minimal root and execs argv; it returns only on
// error.
func runShim(specJSON string, argv []string) error {
	// Capabilities are per thread: the one that drops them must exec.
	runtime.LockOSThread()
	var spec shimSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if len(spec.RO) != len(spec.Paths) {
		return fmt.Errorf("spec: %d paths, %d flags", len(spec.Paths), len(spec.RO))
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	// The run's paths are cloned before /tmp (where they may lie) is
	// covered by the new root.
	trees, err := openTrees(spec.Paths, spec.RO)
	if err != nil {
		return err
	}
	if err := buildRootAt("/tmp", os.Getuid(), os.Getgid()); err != nil {
		return fmt.Errorf("building the minimal root: %w", err)
	}
	if err := populate(&callMounts{tmpSize: spec.TmpSize, trees: trees}); err != nil {
		return err
	}
	closeTrees(trees)
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("chdir %s: %w", spec.Dir, err)
	}
	if err := dropAllCaps(); err != nil {
		return err
	}
	if spec.AddressSpace != nil {
		if err := unix.Setrlimit(unix.RLIMIT_AS, spec.AddressSpace); err != nil {
			return fmt.Errorf("RLIMIT_AS: %w", err)
		}
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}

// Securebits (linux/securebits.h): root gets no capabilities from execve,
// and that cannot be undone.
const (
	secbitNoRoot              = 1 << 0
	secbitNoRootLocked        = 1 << 1
	secbitNoSetuidFixup       = 1 << 2
	secbitNoSetuidFixupLocked = 1 << 3
	secbitKeepCapsLocked      = 1 << 5
)

// dropAllCaps makes the command, uid 0 of the user namespace (the only uid
// the map holds, which the shim needs to keep its capabilities through its
// own execve), capability-less after its execve: an empty bounding set and
// the no-root securebits, on this thread, which execs.
func dropAllCaps() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	bits := secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked | secbitKeepCapsLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	return nil
}

// shimArgs wraps argv in the shim.
func (sb *sandbox) shimArgs(argv []string, dir, workspace string) []string {
	paths, ro := sb.runPaths(argv[0], workspace)
	sp := shimSpec{TmpSize: sb.tmpSize, Paths: paths, RO: ro, Dir: dir}
	for _, r := range sb.limits {
		if r.resource == unix.RLIMIT_AS {
			sp.AddressSpace = &unix.Rlimit{Cur: r.cur, Max: r.max}
		}
	}
	spec, _ := json.Marshal(sp)
	return append([]string{shimArg0, string(spec), "--"}, argv...)
}

// launcherLimits are the rlimits the launcher sets on the stopped child:
// all of them, but RLIMIT_AS for the shim, which sets it itself.
func (sb *sandbox) launcherLimits() []rlimit {
	if !sb.userns {
		return sb.limits
	}
	var out []rlimit
	for _, r := range sb.limits {
		if r.resource != unix.RLIMIT_AS {
			out = append(out, r)
		}
	}
	return out
}
