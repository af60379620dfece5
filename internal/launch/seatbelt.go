package launch

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// macOS's containment seatbelt: every run is started by
// /usr/bin/sandbox-exec with a Seatbelt profile (SBPL) made for it. The
// profile and sandbox-exec's whole argv are made here, by pure functions
// that platform_darwin.go calls, so the tests pin on any OS what a run on a
// Mac gets (testdata/seatbelt/*.golden, built through Launcher.build as
// toold builds a sandbox); platform_darwin.go only resolves the paths and
// starts the argv.
//
// The profile denies everything, then allows:
//   - starting programs (which inherit the profile), signals and process
//     information only within the run's sandbox;
//   - what libc and language runtimes ask of the system: a list of sysctls
//     (not kern.procargs2, which would show other processes' arguments and
//     environment — other runs' keys among them — to a program of the same
//     uid), user lookups, POSIX semaphores and shared memory;
//   - reading, and mapping as code, the system's directories (not all of
//     /Library, nor Homebrew's var/ and etc/: its state and its
//     configuration), the workspace, the read-only paths, the program and
//     the run's private TMPDIR; the metadata (stat) of directories and
//     symbolic links anywhere, which realpath and getcwd need, but no
//     file's content and no directory's listing elsewhere;
//   - writing the run's TMPDIR, and the workspace when the sandbox says so,
//     but never a .git anywhere below it (any case: APFS ignores it) unless
//     the program is git itself (as on Linux: the command tools switch the
//     repository's programs off for every git run);
//   - unix sockets in the run's TMPDIR (its own) and the ones the sandbox
//     lists (unix_sockets), no other: not docker.sock, not an ssh agent;
//   - the network only when the sandbox allows it, and then not toold's
//     own listening ports, denied by port on every address (127.0.0.1,
//     ::1, ::ffff:127.0.0.1, 0.0.0.0, the LAN's): Seatbelt's "localhost"
//     host matches neither the v4-mapped form nor a LAN address, and "*" is
//     the only other host it takes;
//
// and it denies hard links (a link made in the TMPDIR to a file outside
// the run's reach would make that file readable through an allowed path),
// and last (Seatbelt: the last rule that matches wins) reading and writing
// toold's own files (its state, configuration, audit key), whatever a
// read-only path above let in. Paths reach the profile as parameters
// (-D NAME=path, (param "NAME")), never spliced into its text, so no path
// can change the profile's meaning; ports are numbers toold checked.

// SeatbeltExec is the one sandbox-exec toold runs: never one found on PATH.
const SeatbeltExec = "/usr/bin/sandbox-exec"

// seatbeltPolicy is what one run's profile is made from: real paths
// (symbolic links resolved: Seatbelt sees /private/var, not /var).
type seatbeltPolicy struct {
	Workspace string
	Writable  bool
	// GitWritable: the program is git, which may write .git (a writable
	// workspace's only).
	GitWritable bool
	Network     bool
	Tmp         string
	ReadOnly    []string // read_only_paths
	Sockets     []string // unix_sockets
	Program     string   // the program, when no readable directory holds it
	Private     []string // toold's own files and directories
	Ports       []int    // toold's own listening ports (ProtectPorts)
	// Proxy is the port of the run's egress proxy on the loopback (an
	// allow-list): the run reaches that and nothing else of the network.
	Proxy int
}

// seatbeltSystemDirs are the directories every run may read and map as
// code: the system (its libraries and the dyld cache, in the cryptexes of
// macOS 13 and later), the developer tools, the frameworks and JDKs of
// /Library (not the rest of it: keychains, other programs' settings),
// Homebrew's programs and libraries (Apple silicon's /opt/homebrew and
// Intel's /usr/local) with its certificates but not its var/ and etc/, the
// time zones and the selected shell.
// Not all of /System: /System/Volumes/Data holds the users' files.
var seatbeltSystemDirs = []string{
	"/usr/bin", "/usr/lib", "/usr/libexec", "/usr/sbin", "/usr/share", "/usr/standalone", "/bin", "/sbin",
	"/System/Library", "/System/Cryptexes", "/System/Volumes/Preboot/Cryptexes",
	"/Library/Apple", "/Library/Developer/CommandLineTools", "/Library/Frameworks", "/Library/Java/JavaVirtualMachines",
	"/Applications/Xcode.app",
	"/opt/homebrew/bin", "/opt/homebrew/sbin", "/opt/homebrew/Cellar", "/opt/homebrew/opt", "/opt/homebrew/lib",
	"/opt/homebrew/libexec", "/opt/homebrew/share", "/opt/homebrew/include", "/opt/homebrew/Frameworks",
	"/opt/homebrew/etc/ca-certificates", "/opt/homebrew/etc/openssl@3",
	"/usr/local/bin", "/usr/local/sbin", "/usr/local/Cellar", "/usr/local/opt", "/usr/local/lib",
	"/usr/local/libexec", "/usr/local/share", "/usr/local/include", "/usr/local/Frameworks",
	"/usr/local/etc/ca-certificates", "/usr/local/etc/openssl@3",
	"/private/etc", "/private/var/db/timezone", "/private/var/db/dyld", "/private/var/select",
	"/private/var/db/xcode_select_link",
}

// seatbeltSysctls are the sysctls a run may read (names, then prefixes).
// kern.proc.pid.* tells any process's name, uid and parent (not its
// arguments or environment: kern.procargs2 is not here); programs ask it
// of themselves and their children, and Seatbelt cannot scope it to them.
var seatbeltSysctls = []string{
	"hw.activecpu", "hw.byteorder", "hw.cachelinesize", "hw.cpufamily", "hw.cputype", "hw.l1dcachesize",
	"hw.l2cachesize", "hw.logicalcpu", "hw.logicalcpu_max", "hw.machine", "hw.memsize", "hw.model", "hw.ncpu",
	"hw.nperflevels", "hw.pagesize", "hw.physicalcpu", "hw.physicalcpu_max", "hw.vectorunit",
	"kern.argmax", "kern.hostname", "kern.maxfiles", "kern.maxfilesperproc", "kern.maxproc", "kern.ngroups",
	"kern.osproductversion", "kern.osrelease", "kern.ostype", "kern.osvariant_status", "kern.osversion",
	"kern.secure_kernel", "kern.usrstack64", "kern.version", "machdep.cpu.brand_string", "sysctl.proc_cputype",
	"vm.loadavg",
}

var seatbeltSysctlPrefixes = []string{"hw.optional.", "hw.perflevel", "kern.proc.pid.", "kern.proc.pgrp.", "machdep.cpu."}

// seatbeltMach are the system services every run may reach: user and
// group lookups, notifications, logging.
var seatbeltMach = []string{
	"com.apple.system.opendirectoryd.libinfo", "com.apple.system.opendirectoryd.membership",
	"com.apple.system.notification_center", "com.apple.system.logger", "com.apple.logd",
}

// seatbeltNetMach are the services a run with the network also reaches:
// name resolution and certificate trust.
var seatbeltNetMach = []string{
	"com.apple.dnssd.service", "com.apple.trustd", "com.apple.trustd.agent", "com.apple.SecurityServer",
	"com.apple.networkd",
}

// seatbeltResolver is the unix socket of macOS's name resolver
// (mDNSResponder): a networked run reaches it, no other of the host's.
const seatbeltResolver = "/private/var/run/mDNSResponder"

// seatbeltArgv is sandbox-exec's argv for p, from its own path up to and
// including the "--" before the program's argv.
func seatbeltArgv(p seatbeltPolicy) []string {
	profile, params := seatbeltProfile(p)
	args := []string{SeatbeltExec, "-p", profile}
	for _, kv := range params {
		args = append(args, "-D"+kv[0]+"="+kv[1])
	}
	return append(args, "--")
}

// seatbeltGuardArgv is the argv of containment none's one restriction on a
// Mac: everything allowed but toold's own ports (nil without ports: none
// then runs the program as it is). Linux's none has the same port guard
// (Landlock); nothing else of none is contained.
func seatbeltGuardArgv(ports []int) []string {
	if len(ports) == 0 {
		return nil
	}
	var b profileWriter
	b.line("(version 1)")
	b.line("; toold: containment none isolates nothing but toold's own ports (internal/launch/seatbelt.go)")
	b.line("(allow default)")
	b.portDenies(ports)
	return []string{SeatbeltExec, "-p", b.String(), "--"}
}

// seatbeltProfile is the profile's text and its parameters, in order.
func seatbeltProfile(p seatbeltPolicy) (string, [][2]string) {
	var b profileWriter
	b.line("(version 1)")
	b.line("; toold: one run's Seatbelt profile (internal/launch/seatbelt.go)")
	b.line("(deny default)")
	b.section("programs: start others, which inherit this profile; signal and inspect only this sandbox's")
	b.line("(allow process-exec process-fork)")
	b.line("(allow signal (target same-sandbox))")
	b.line("(allow process-info* (target same-sandbox))")
	b.section("what libc and runtimes ask of the system")
	b.list("(allow sysctl-read", "(sysctl-name %q)", seatbeltSysctls)
	b.list("(allow sysctl-read", "(sysctl-name-prefix %q)", seatbeltSysctlPrefixes)
	b.list("(allow mach-lookup", "(global-name %q)", seatbeltMach)
	b.line("(allow user-preference-read)")
	b.line("(allow ipc-posix-sem ipc-posix-shm)")
	b.line(`(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))`)
	b.section("devices")
	b.line(`(allow file-read* file-write-data file-ioctl (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper"))`)
	b.line(`(allow file-read* (literal "/dev/random") (literal "/dev/urandom"))`)
	b.line(`(allow file-read* file-write* (subpath "/dev/fd"))`)
	b.section("reads, and code mapped from them: the system, the workspace, the read-only paths, the program, the run's TMPDIR")
	b.line("(allow file-read-metadata (vnode-type DIRECTORY) (vnode-type SYMLINK))")
	reads := []string{`(literal "/")`}
	for _, d := range seatbeltSystemDirs {
		reads = append(reads, fmt.Sprintf("(subpath %q)", d))
	}
	reads = append(reads, b.param("subpath", "WORKSPACE", p.Workspace), b.param("subpath", "TMPDIR", p.Tmp))
	for i, d := range p.ReadOnly {
		reads = append(reads, b.param("subpath", fmt.Sprintf("READ_ONLY_%d", i), d))
	}
	if p.Program != "" {
		reads = append(reads, b.param("literal", "PROGRAM", p.Program))
	}
	b.list("(allow file-read* file-map-executable", "%s", reads)
	b.section("writes: the run's TMPDIR" + map[bool]string{true: " and the workspace", false: " only: the workspace is read-only"}[p.Writable])
	b.line(`(allow file-write* (subpath (param "TMPDIR")))`)
	if p.Writable {
		b.line(`(allow file-write* (subpath (param "WORKSPACE")))`)
	}
	if p.GitWritable && p.Writable {
		b.line("; .git: git itself may write it (the command tools switch the repository's programs off for every git run)")
	} else {
		b.line("; .git is read-only to every run but git's (issue 24), wherever it is made, in any case (APFS ignores it)")
		b.line(`(deny file-write* (require-all (subpath (param "WORKSPACE")) (regex #"/\.[Gg][Ii][Tt](/.*)?$")))`)
	}
	b.line("; no hard links: one made in the TMPDIR to a file outside the run's reach would open that file to it")
	b.line("(deny file-link)")
	b.section("unix sockets: the run's own (in its TMPDIR)" + map[bool]string{true: " and the ones its sandbox lists", false: ", no other"}[len(p.Sockets) > 0])
	b.line("(allow system-socket (socket-domain AF_UNIX))")
	b.line(`(allow network-bind (local unix-socket (subpath (param "TMPDIR"))))`)
	sockets := []string{`(remote unix-socket (subpath (param "TMPDIR")))`}
	for i, s := range p.Sockets {
		sockets = append(sockets, "(remote unix-socket "+b.param("subpath", fmt.Sprintf("UNIX_SOCKET_%d", i), s)+")")
	}
	b.list("(allow network-outbound", "%s", sockets)
	b.section("network")
	if p.Proxy > 0 {
		b.line("; an allow-list: toold's egress proxy on the loopback is the only way out (names are resolved by toold)")
		b.line(fmt.Sprintf(`(allow network-outbound (remote ip "localhost:%d"))`, p.Proxy))
	} else if p.Network {
		b.line(`(allow network-outbound (remote ip "*:*"))`)
		b.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		b.line(fmt.Sprintf("(allow network-outbound (remote unix-socket (path-literal %q)))", seatbeltResolver))
		b.line(`(allow file-read* (literal "/private/var/run/resolv.conf"))`)
		b.list("(allow mach-lookup", "(global-name %q)", seatbeltNetMach)
		b.portDenies(p.Ports)
	} else {
		b.line("; none: the sandbox does not allow it")
	}
	if len(p.Private) > 0 {
		b.section("toold's own files: no run reads or writes them, whatever allowed it above")
		var priv []string
		for i, f := range p.Private {
			priv = append(priv, b.param("subpath", fmt.Sprintf("TOOLD_%d", i), f))
		}
		b.list("(deny file-read* file-write* file-map-executable", "%s", priv)
	}
	return b.String(), b.params
}

// profileWriter builds a profile's text and collects its parameters.
type profileWriter struct {
	strings.Builder
	params [][2]string
}

func (b *profileWriter) line(s string) { b.WriteString(s + "\n") }

func (b *profileWriter) section(title string) { b.line("\n; " + title) }

// list writes open, then one indented item per element (format applied),
// and the closing parenthesis.
func (b *profileWriter) list(open, format string, items []string) {
	b.line(open)
	for _, it := range items {
		b.line("  " + fmt.Sprintf(format, it))
	}
	b.line(")")
}

// param records a path parameter and returns the filter naming it.
func (b *profileWriter) param(filter, name, path string) string {
	b.params = append(b.params, [2]string{name, path})
	return fmt.Sprintf("(%s (param %q))", filter, name)
}

// portDenies denies connecting to toold's ports on every address; ports
// out of range (never toold's) are left out rather than spliced.
func (b *profileWriter) portDenies(ports []int) {
	var items []string
	for _, p := range slices.Sorted(slices.Values(ports)) {
		if p > 0 && p < 65536 {
			items = append(items, fmt.Sprintf(`(remote ip "*:%s")`, strconv.Itoa(p)))
		}
	}
	if len(items) == 0 {
		b.line("; toold's ports are not known yet (ProtectPorts): none is denied")
		return
	}
	b.line("; toold's own listeners, by port on every address: 127.0.0.1, ::1, ::ffff:127.0.0.1, 0.0.0.0, the LAN's")
	b.list("(deny network-outbound", "%s", slices.Compact(items))
}

// seatbeltPolicy is the policy of one run of program (absolute) with the
// private temporary directory tmp, while toold listens on ports; real
// resolves a path's symbolic links (realPath on a Mac; the tests pass paths
// that are real already).
func (sb *sandbox) seatbeltPolicy(program, workspace, tmp string, real func(string) string, ports []int) seatbeltPolicy {
	p := seatbeltPolicy{Workspace: real(workspace), Writable: sb.writable, Network: sb.network, Tmp: real(tmp),
		GitWritable: filepath.Base(program) == "git", Ports: ports}
	if sb.net != nil {
		p.Proxy = sb.net.port
	}
	for _, d := range sb.roPaths {
		p.ReadOnly = append(p.ReadOnly, real(d))
	}
	for _, s := range sb.sockets {
		p.Sockets = append(p.Sockets, real(s))
	}
	readable := append(append([]string{p.Workspace}, p.ReadOnly...), seatbeltSystemDirs...)
	if prog := real(program); !underAny(prog, readable) {
		p.Program = prog
	}
	for _, f := range sb.private {
		p.Private = append(p.Private, real(f))
	}
	return p
}

// macHost is what a Mac run's argv depends on beyond its sandbox: the
// workspace, the run's TMPDIR, toold's binary (the rlimit shim; "" when it
// was not found), how symbolic links resolve, toold's ports, and whether
// sandbox-exec works here (the port guard of containment none).
type macHost struct {
	workspace, tmp, shim string
	real                 func(string) string
	ports                []int
	sandboxExec          bool
}

// rlimitShimArg0 marks a run of macOS's rlimit shim (shim_darwin.go).
const rlimitShimArg0 = "toold-rlimits"

// seatbeltRun is the exec.Cmd Path and Args of one run of argv (argv[0]
// absolute) under sb on a Mac: toold's rlimit shim first when the sandbox
// has rlimits, then sandbox-exec with the run's profile (seatbelt) or the
// port guard (none), then the program. platform_darwin.go starts exactly
// this; the golden tests pin it.
func (sb *sandbox) seatbeltRun(argv []string, m macHost) (string, []string) {
	run := argv
	switch {
	case sb.mode == ModeSeatbelt:
		run = append(seatbeltArgv(sb.seatbeltPolicy(argv[0], m.workspace, m.tmp, m.real, m.ports)), argv...)
	case sb.mode == ModeNone && m.sandboxExec && len(m.ports) > 0:
		run = append(seatbeltGuardArgv(m.ports), argv...)
	}
	if len(sb.limits) > 0 && m.shim != "" {
		// argv[0] is the shim's mark (Shim reads it), the path toold's binary.
		return m.shim, append([]string{rlimitShimArg0, encodeShimRlimits(sb.limits, sb.headroom), "--"}, run...)
	}
	return run[0], run
}
