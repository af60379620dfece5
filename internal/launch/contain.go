package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toold/toold/internal/egress"
)

// Mode is how a command is isolated from the host.
type Mode string

// The containment modes. ModeAuto is resolved when a sandbox is. Which
// modes a platform provides is its resolve's to say (platform.go).
const (
	ModeAuto       Mode = "auto"
	ModeNone       Mode = "none"
	ModeNamespaces Mode = "namespaces"
	ModeBwrap      Mode = "bwrap"
	ModeSeatbelt   Mode = "seatbelt" // macOS (seatbelt.go)
	ModeJob        Mode = "job"      // Windows (job.go)
)

// sandbox is a tool's resolved containment.
type sandbox struct {
	mode     Mode
	reason   string // why this mode (for auto)
	launcher *launcher
	bwrap    string
	network  bool
	writable bool
	roPaths  []string
	sockets  []string // unix sockets the sandbox may connect to (Sandbox.UnixSockets)
	limits   []rlimit
	procs    bool // the process-count limit holds
	drop     bool // runs as uid:gid
	userns   bool // namespaces without root: a user namespace per run
	headroom bool // the process-count limit counts from the uid's processes at the run's start (macOS)
	seccomp  bool // the syscall filter is wanted (seccomp_linux.go)
	uid, gid int
	maxOut   int
	grace    time.Duration
	env      []string // allowed and fixed variables; per-run ones are added
	cg       *cgroupHost
	call     callLimits // enforced by the run's cgroups, when there are any
	tmpSize  int64      // the run's /tmp (namespaces as root)
	lim      Rlimits    // the merged limits (a Windows job's plan reads them)
	private  []string   // toold's own files (Config.Private)
	plat     platformSandbox
	// enforced is what each limit is enforced by, for every result.
	enforced map[string]string
	// egress is the allow-list of network: {allow: ...} (egress.go);
	// net is one run's proxy, in the copy of the sandbox made for that
	// run; self is toold's binary, for bwrap's egress helper.
	egress *egress.Compiled
	net    *netRun
	self   *os.File
}

// rlimit is one resource limit to apply to a child (on a platform with
// rlimits: Rlimits.list).
type rlimit struct {
	name     string
	resource int
	cur, max uint64
	relative bool // read by the macOS shim: add the uid's processes (encodeShimRlimits)
}

// callLimits are what a run's cgroups enforce; 0 or less: not limited.
type callLimits struct {
	memory int64
	pids   int
	cpus   float64
}

// notIsolated is how a result of containment none names it.
const notIsolated = "none (not isolated)"

// minimalRoot says whether runs see the minimal root (namespaces: built by
// the launcher thread as root, by the shim without).
func (sb *sandbox) minimalRoot() bool { return sb.mode == ModeNamespaces }

// tmpfsTmp says whether a run's /tmp (and TMPDIR) is a tmpfs of its own:
// the minimal root's, or bwrap's --tmpfs.
func (sb *sandbox) tmpfsTmp() bool { return sb.minimalRoot() || sb.mode == ModeBwrap }

// short is the containment in a few words, as every result carries it.
func (sb *sandbox) short() string {
	switch {
	case sb.mode == ModeNone:
		return notIsolated
	case sb.userns:
		return "namespaces (unprivileged user namespace)"
	case sb.mode == ModeJob:
		return "job (AppContainer)"
	}
	return string(sb.mode)
}

// describe is the sandbox in one phrase, for discovery and the start-up log.
func (sb *sandbox) describe() string {
	parts := []string{sb.short()}
	if sb.reason != "" {
		parts[0] += " (" + sb.reason + ")"
	}
	if sb.drop {
		parts = append(parts, fmt.Sprintf("uid %d", sb.uid))
	}
	switch {
	case sb.egress != nil:
		parts = append(parts, "network: "+sb.egress.Describe())
	case sb.network && sb.mode == ModeSeatbelt:
		parts = append(parts, "network allowed but toold's own ports (on every address) and the host's unix sockets")
	case sb.network && sb.mode == ModeJob:
		parts = append(parts, "network allowed but no address of this machine (AppContainer)")
	case sb.network:
		parts = append(parts, "network allowed")
	case sb.mode == ModeNone:
		parts = append(parts, "network NOT isolated (containment none)")
	default:
		parts = append(parts, "no network")
	}
	switch {
	case sb.mode == ModeNone:
		parts = append(parts, "host file system visible, workspace protected by file permissions only")
	case sb.writable:
		parts = append(parts, "workspace writable")
	default:
		parts = append(parts, "workspace read-only")
	}
	if sb.minimalRoot() {
		parts = append(parts, "minimal root, private /tmp")
	}
	if !sb.procs {
		parts = append(parts, "no process-count limit")
	}
	if !sb.seccomp && (sb.mode == ModeNamespaces || sb.mode == ModeBwrap) {
		parts = append(parts, "no syscall filter (seccomp: false)")
	}
	return strings.Join(parts, "; ")
}

// finish fills what follows from the mode and the host: the run's cgroup
// limits and what enforces each limit.
func (sb *sandbox) finish(h *host, r Rlimits) {
	sb.cg = h.cgroups()
	if sb.cg.usable() {
		sb.call = callLimits{memory: r.Memory, pids: r.Processes, cpus: r.CPUs}
		if _, ok := sb.cg.has("pids"); ok && r.Processes > 0 {
			sb.procs = true
		}
	}
	if sb.tmpfsTmp() {
		sb.tmpSize = max(r.TmpSize, 0)
	}
	sb.lim = r
	sb.enforced = sb.enforcement(r)
	sb.finishPlatform(h)
}

// pidsByCgroup says whether the run's cgroup bounds its processes (the
// per-uid RLIMIT_NPROC, shared by concurrent runs, is then not set).
func (sb *sandbox) pidsByCgroup() bool {
	_, ok := sb.cg.has("pids")
	return ok && sb.call.pids > 0
}

// enforcement says, per limit, how a run is held to it.
func (sb *sandbox) enforcement(r Rlimits) map[string]string {
	e := map[string]string{}
	per := func(name string, v int64, unit string) string {
		switch {
		case v < 0:
			return "not limited"
		case !hasRlimits:
			return "not limited (no rlimits on " + runtime.GOOS + ")"
		}
		return fmt.Sprintf("%s %d%s per process (rlimit)", name, v, unit)
	}
	e["cpu_time"] = per("RLIMIT_CPU", int64((r.CPU+999_999_999)/time.Second), "s")
	if r.CPU < 0 {
		e["cpu_time"] = "not limited"
	}
	e["address_space"] = per("RLIMIT_AS", r.AddressSpace, " bytes")
	if hasRlimits && !limitsAddressSpace && r.AddressSpace >= 0 {
		e["address_space"] = "not limited (" + runtime.GOOS + " does not enforce RLIMIT_AS)"
	}
	e["file_size"] = per("RLIMIT_FSIZE", r.FileSize, " bytes")
	e["open_files"] = per("RLIMIT_NOFILE", int64(r.OpenFiles), "")
	cg := func(ctl, file string, v string, ok bool) (string, bool) {
		how, has := sb.cg.has(ctl)
		if !has || !ok {
			return "", false
		}
		if how == "cgroup v1" {
			file = map[string]string{"memory.max": "memory.limit_in_bytes", "cpu.max": "cpu.cfs_quota_us", "pids.max": "pids.max"}[file]
		}
		return fmt.Sprintf("%s %s=%s for the whole run", how, file, v), true
	}
	if s, ok := cg("memory", "memory.max", strconv.FormatInt(r.Memory, 10), r.Memory > 0); ok {
		e["memory"] = s
	} else if hasRlimits && limitsAddressSpace {
		e["memory"] = "not limited per run (address space per process only)"
	} else {
		e["memory"] = "not limited"
	}
	switch s, ok := cg("pids", "pids.max", strconv.Itoa(r.Processes), r.Processes > 0); {
	case ok:
		e["processes"] = s
	case sb.procs && r.Processes > 0:
		e["processes"] = fmt.Sprintf("RLIMIT_NPROC %d, shared by every run of uid %d", r.Processes, sb.uid)
	default:
		e["processes"] = "not limited"
	}
	quota := strconv.FormatInt(max(1000, int64(r.CPUs*100000)), 10)
	if how, ok := sb.cg.has("cpu"); ok && r.CPUs > 0 {
		file := "cpu.max=" + quota + " 100000"
		if how == "cgroup v1" {
			file = "cpu.cfs_quota_us=" + quota + " (period 100000)"
		}
		e["cpus"] = fmt.Sprintf("%s %s, %s CPUs for the whole run", how, file, strconv.FormatFloat(r.CPUs, 'g', -1, 64))
	} else {
		e["cpus"] = "not limited"
	}
	switch {
	case sb.tmpfsTmp() && sb.tmpSize > 0:
		e["tmp"] = fmt.Sprintf("private tmpfs /tmp of %d bytes, gone with the run", sb.tmpSize)
	case sb.tmpfsTmp():
		e["tmp"] = "private tmpfs /tmp, gone with the run (size not capped)"
	default:
		e["tmp"] = "private TMPDIR removed after the run (size not capped; file size per process)"
	}
	switch {
	case sb.cg.descendants() != "":
		e["descendants"] = sb.cg.descendants()
	case sb.mode == ModeNamespaces || sb.mode == ModeBwrap:
		e["descendants"] = "PID namespace, ended with its init"
	default:
		e["descendants"] = groupOnly
	}
	return e
}

// runPaths are the host paths a run sees in the minimal root, and which
// are read-only: the workspace, the read-only paths, the unix sockets it
// lists (connect needs no writable mount) and the program when it is
// elsewhere.
func (sb *sandbox) runPaths(program, workspace string) ([]string, []bool) {
	paths, ro := []string{workspace}, []bool{!sb.writable}
	for _, p := range append(append([]string(nil), sb.roPaths...), sb.sockets...) {
		paths, ro = append(paths, p), append(ro, true)
	}
	if !underAny(program, append(append([]string{workspace}, sb.roPaths...), systemDirs...)) {
		paths, ro = append(paths, program), append(ro, true)
	}
	return paths, ro
}

// systemDirs are bound read-only into a bwrap sandbox when they exist; a
// symlink (merged /usr) is recreated as a symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

func (sb *sandbox) bwrapArgs(program, dir, workspace, tmp string) []string {
	a := []string{"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"}
	if sb.network {
		a = append(a, "--share-net")
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--perms", "1777")
	if sb.tmpSize > 0 {
		a = append(a, "--size", strconv.FormatInt(sb.tmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	for _, p := range append(append([]string(nil), sb.roPaths...), sb.sockets...) {
		a = append(a, "--ro-bind-try", p, p)
	}
	if !underAny(program, systemDirs) {
		a = append(a, "--ro-bind", program, program)
	}
	bind := "--ro-bind"
	if sb.writable {
		bind = "--bind"
	}
	a = append(a, bind, workspace, workspace)
	if tmp != "/tmp" {
		a = append(a, "--bind", tmp, tmp) // the probe's host directory
	}
	return append(a, "--chdir", dir)
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// host is what the Set learned about the machine, once. Sandboxes are
// resolved while serving too (upstream MCP servers start and restart), so
// the launchers and what was learned are guarded.
type host struct {
	mu        sync.Mutex // guards nsErr, bwrapErr, launchers and cg
	root      bool
	uid, gid  int
	workspace string
	bwrap     string
	nsErr     error // why namespaces cannot be used; nil when they can
	bwrapErr  error
	launchers map[Mode]*launcher
	rl        rlimitTable // this OS's rlimits (hostRlimits)
	cg        *cgroupHost
	cgOnce    sync.Once
	ports     *portGuard   // ProtectPorts' ruleset (Linux); nil before
	plat      platformHost // what the OS's own modes learned (platform.go)
	seen      map[exposure]bool
	// self is toold's own binary, opened once for the egress helper of
	// bwrap runs (egress.go).
	self     *os.File
	selfErr  error
	selfOnce sync.Once
}

// exposure is what decides whether a sandbox's runs can reach toold's own
// listeners: its mode and its network.
type exposure struct {
	mode    Mode
	network bool
}

// saw records a resolved sandbox's exposure for Exposed.
func (h *host) saw(sb *sandbox) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[exposure]bool{}
	}
	h.seen[exposure{sb.mode, sb.network}] = true
}

// Exposed lists, one phrase each, the kinds of sandbox resolved so far
// whose programs can reach toold's own listeners on this machine: those
// the platform's port guard does not cover (portsGuarded). Empty when
// every program toold started or will start the same way is kept from
// them. cmd/toold narrows the anonymous caller when it is not empty.
func (l *Launcher) Exposed() []string {
	h := l.host
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for e := range h.seen {
		if !h.portsGuarded(e.mode, e.network) {
			out = append(out, fmt.Sprintf("containment %s with network %v", e.mode, e.network))
		}
	}
	slices.Sort(out)
	return out
}

// selfExe opens toold's own binary once.
func (h *host) selfExe() (*os.File, error) {
	h.selfOnce.Do(func() { h.self, h.selfErr = os.Open("/proc/self/exe") })
	return h.self, h.selfErr
}

// cgroups finds the host's cgroups on first use.
func (h *host) cgroups() *cgroupHost {
	h.cgOnce.Do(func() { h.cg = findCgroups() })
	return h.cg
}

// findBwrap locates bubblewrap; an error says why it cannot be used.
func findBwrap(name string) (string, error) {
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("bubblewrap is not installed (%v)", err)
	}
	return filepath.Abs(p)
}
