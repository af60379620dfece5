package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Without root, the minimal root cannot be built on a launcher thread: a
// thread of a multi-threaded process cannot enter a user namespace. So the
// child of containment namespaces (not root) is cloned into new user,
// mount, PID, IPC, UTS and network namespaces running toold's own binary
// as a shim: Shim, which main calls before anything else of toold, builds
// the minimal root in the child's namespaces (the same code as the root
// launcher's), mounts its /tmp and paths, and execs the command.
//
// How the child gets its uid map (issue 24, item 5). toold is
// non-dumpable (cmd/toold's harden), and a child that has not exec'd yet
// shares that: the kernel makes its /proc files root's, so toold, not
// root, cannot write its uid_map before its exec, which is when os/exec
// writes it (the built toold failed with "fork/exec /proc/self/exe:
// permission denied"). After an exec the child is dumpable and its files
// are its own uid's, toold's: the launcher thread writes the maps then,
// at the child's exec stop (it is traced for its rlimits anyway). But the
// kernel grants a user namespace's capabilities at an exec only when the
// uid is mapped to 0 at that moment, so the first exec must be a
// trampoline that execs the shim once mapped: env(1), which starts in a
// millisecond where toold's own binary takes tens, given toold's binary
// as /proc/self/fd/3 (shimExeFD; a descriptor toold opened on itself, so
// an upgrade of the file on disk changes nothing). The other way out,
// making toold dumpable around the clone, would open /proc/PID/mem of
// toold to every process of its uid (a run under containment none among
// them) for as long as the start takes: the hardening would not hold.
//
// Rlimits are set at that stop, so the shim and the command inherit them.
// This costs a start of toold's binary per run (its runtime and package
// initialisation: 0.1–0.2 s on the loaded test machine), which only the
// unprivileged fallback pays: bwrap, which auto prefers without root,
// costs far less.

// shimArg0 marks a shim run: argv is the trampoline's path of the binary,
// shimArg0, the spec, "--", the command.
const shimArg0 = "toold-sandbox-init"

// shimExeFD is the descriptor toold's binary is passed to the trampoline
// on (the first of exec.Cmd's ExtraFiles), shimPortsFD the Landlock
// ruleset of ProtectPorts (the second, when there is one).
const (
	shimExeFD   = 3
	shimPortsFD = 4
)

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
	// Seccomp installs the syscall filter right before the exec.
	Seccomp bool `json:"seccomp,omitempty"`
	// Ports applies the Landlock ruleset of ProtectPorts, passed on
	// shimPortsFD (ports_linux.go).
	Ports bool `json:"ports,omitempty"`
	// Egress opens the egress proxy's listener in the run's network
	// namespace and sends it to toold (egress_linux.go).
	Egress *egressSpec `json:"egress,omitempty"`
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
	if len(os.Args) > 4 && os.Args[1] == shimArg0 && os.Args[3] == "--" {
		err := runShim(os.Args[2], os.Args[4:])
		fmt.Fprintf(os.Stderr, "toold sandbox: %v\n", err)
		os.Exit(127)
	}
	if len(os.Args) > 4 && os.Args[1] == egressArg0 && os.Args[3] == "--" {
		err := runEgressHelper(os.Args[2], os.Args[4:])
		fmt.Fprintf(os.Stderr, "toold sandbox (egress): %v\n", err)
		os.Exit(127)
	}
}

// runShim sets up the minimal root and execs argv; it returns only on
// error.
func runShim(specJSON string, argv []string) error {
	// Capabilities are per thread: the one that drops them must exec.
	runtime.LockOSThread()
	// The capabilities this exec gained cleared the parent-death signal
	// the launcher gave the child: the run must still die with the
	// launcher thread that started it.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
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
	if spec.Egress != nil {
		// With the namespace's capabilities still: the loopback comes up.
		if err := sendListener(*spec.Egress); err != nil {
			return err
		}
	}
	if err := dropAllCaps(); err != nil {
		return err
	}
	// The launcher thread of this mode leaves no_new_privs to the shim
	// (it would have kept this exec from gaining the namespace's
	// capabilities): the command gains nothing by a setuid file.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if spec.Ports {
		if err := (&portGuard{fd: shimPortsFD}).restrict(); err != nil {
			return fmt.Errorf("taking toold's ports away: %w", err)
		}
	}
	// toold's binary (shimExeFD) and whatever else came along stay here.
	if err := unix.CloseRange(shimExeFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("closing inherited descriptors: %w", err)
	}
	var filter func() error
	if spec.Seccomp {
		// After the mounts above, which the filter denies.
		filter = func() error { return installFilter(false) }
	}
	return execLimited(argv, spec.AddressSpace, filter)
}

// execLimited replaces this process with argv (this environment), with
// RLIMIT_AS set to as (when not nil) at the last moment: nothing is
// allocated past it, not even by syscall.Exec — the shim's and the egress
// helper's Go runtime needs more address space than the command may have,
// and an allocation there fails the run ("cannot allocate memory"). So
// the exec's arguments are built first; then before runs (a seccomp
// filter the allocation's syscalls would meet), then the limit, then the
// raw execve. It returns only on error.
func execLimited(argv []string, as *unix.Rlimit, before func() error) error {
	path, err := unix.BytePtrFromString(argv[0])
	if err != nil {
		return err
	}
	args, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	env, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return err
	}
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	if as != nil {
		if err := unix.Setrlimit(unix.RLIMIT_AS, as); err != nil {
			return fmt.Errorf("RLIMIT_AS: %w", err)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&args[0])), uintptr(unsafe.Pointer(&env[0])))
	return fmt.Errorf("exec %s: %w", argv[0], e)
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
func (sb *sandbox) shimArgs(argv []string, dir, workspace string, ports bool, eg *egressSpec) []string {
	paths, ro := sb.linuxRunPaths(argv[0], workspace)
	sp := shimSpec{TmpSize: sb.tmpSize, Paths: paths, RO: ro, Dir: dir, Seccomp: sb.filtered(), Ports: ports, Egress: eg}
	for _, r := range sb.limits {
		if r.resource == unix.RLIMIT_AS {
			sp.AddressSpace = &unix.Rlimit{Cur: r.cur, Max: r.max}
		}
	}
	spec, _ := json.Marshal(sp)
	return append([]string{shimArg0, string(spec), "--"}, argv...)
}

// launcherLimits are the rlimits the launcher sets on the stopped child:
// all of them, but RLIMIT_AS for the shim and the egress helper, which
// set it themselves.
func (sb *sandbox) launcherLimits() []rlimit {
	if !sb.userns && !sb.helped() {
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

// usernsStart is what a launcher of namespaces without root needs to start
// a child (see the top of this file): toold's binary, opened once, the
// trampoline, and the ids toold maps to 0.
type usernsStart struct {
	exe        *os.File
	trampoline string
	uid, gid   int
	ports      atomic.Pointer[portGuard] // ProtectPorts' ruleset, for the shim
}

func newUsernsStart() (*usernsStart, error) {
	trampoline, err := FindProgram("env", DefaultPath)
	if err != nil {
		return nil, fmt.Errorf("namespaces without root start the shim through env(1): %w", err)
	}
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("opening toold's own binary for the shim: %w", err)
	}
	return &usernsStart{exe: exe, trampoline: trampoline, uid: os.Getuid(), gid: os.Getgid()}, nil
}

func (u *usernsStart) close() {
	if u != nil {
		_ = u.exe.Close()
	}
}

// mapIDs maps toold's uid and gid to 0 in the user namespace of pid, a
// child stopped after its first execve (nothing to do when u is nil). Each
// map is written once, in one write, as the kernel requires; setgroups is
// denied first, which an unprivileged gid map needs.
func (u *usernsStart) mapIDs(pid int) error {
	if u == nil {
		return nil
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, m := range [][2]string{{"setgroups", "deny"}, {"uid_map", fmt.Sprintf("0 %d 1\n", u.uid)},
		{"gid_map", fmt.Sprintf("0 %d 1\n", u.gid)}} {
		f, err := os.OpenFile(dir+m[0], os.O_WRONLY, 0)
		if err == nil {
			_, err = f.Write([]byte(m[1]))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("mapping the run's user namespace (%s): %w", m[0], err)
		}
	}
	return nil
}
