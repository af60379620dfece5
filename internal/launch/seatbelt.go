package launch

import (
	"fmt"
	"strings"
)

// macOS's containment seatbelt: every run is started by
// /usr/bin/sandbox-exec with a Seatbelt profile (SBPL) made for it. The
// profile is generated here, by pure functions, so the tests pin on any OS
// what a run on a Mac gets (testdata/seatbelt/*.golden); platform_darwin.go
// only resolves the paths and starts sandbox-exec.
//
// The profile denies everything, then allows:
//   - starting programs (which inherit the profile), signals and process
//     information only within the run's sandbox;
//   - what libc and language runtimes ask of the system: a list of sysctls
//     (not kern.procargs2, which would show toold's own arguments and
//     environment to a program of the same uid), user lookups, POSIX
//     semaphores and shared memory;
//   - reading the system's directories, the workspace, the read-only
//     paths, the program and the run's private TMPDIR; the metadata (stat)
//     of directories and symbolic links anywhere, which realpath and getcwd
//     need, but no file's content and no directory's listing elsewhere;
//   - writing the run's TMPDIR, and the workspace when the sandbox says so,
//     but never a .git anywhere below it (any case: APFS ignores it);
//   - the network only when the sandbox allows it, and then not the host's
//     loopback (toold's own listeners, issue 24);
//
// and last (Seatbelt: the last rule that matches wins) it denies reading and
// writing toold's own files (its state, configuration, audit key), whatever
// a read-only path above let in. Paths reach the profile as parameters
// (-D NAME=path, (param "NAME")), never spliced into its text, so no path
// can change the profile's meaning.

// SeatbeltExec is the one sandbox-exec toold runs: never one found on PATH.
const SeatbeltExec = "/usr/bin/sandbox-exec"

// seatbeltPolicy is what one run's profile is made from: real paths
// (symbolic links resolved: Seatbelt sees /private/var, not /var).
type seatbeltPolicy struct {
	Workspace string
	Writable  bool
	Network   bool
	Tmp       string
	ReadOnly  []string // read_only_paths
	Program   string   // the program, when no readable directory holds it
	Private   []string // toold's own files and directories
}

// seatbeltSystemDirs are the directories every run may read: the system
// (its libraries and the dyld cache, in the cryptexes of macOS 13 and
// later), the developer tools, Homebrew, the time zones and the selected
// shell. Not all of /System: /System/Volumes/Data holds the users' files.
var seatbeltSystemDirs = []string{
	"/usr", "/bin", "/sbin", "/System/Library", "/System/Cryptexes", "/System/Volumes/Preboot/Cryptexes",
	"/Library", "/Applications/Xcode.app", "/opt/homebrew",
	"/private/etc", "/private/var/db/timezone", "/private/var/db/dyld", "/private/var/select",
	"/private/var/db/xcode_select_link",
}

// seatbeltSysctls are the sysctls a run may read (names, then prefixes).
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

// seatbeltArgs is sandbox-exec's arguments for p, up to and including the
// "--" before the program's own argv.
func seatbeltArgs(p seatbeltPolicy) []string {
	profile, params := seatbeltProfile(p)
	args := []string{"-p", profile}
	for _, kv := range params {
		args = append(args, "-D"+kv[0]+"="+kv[1])
	}
	return append(args, "--")
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
	b.section("reads: the system, the workspace, the read-only paths, the program, the run's TMPDIR")
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
	b.list("(allow file-read*", "%s", reads)
	b.section("writes: the run's TMPDIR" + map[bool]string{true: " and the workspace", false: " only: the workspace is read-only"}[p.Writable])
	b.line(`(allow file-write* (subpath (param "TMPDIR")))`)
	if p.Writable {
		b.line(`(allow file-write* (subpath (param "WORKSPACE")))`)
	}
	b.line("; .git is read-only to every run (issue 24), in any case (APFS ignores it)")
	b.line(`(deny file-write* (require-all (subpath (param "WORKSPACE")) (regex #"/\.[Gg][Ii][Tt](/.*)?$")))`)
	b.section("network")
	if p.Network {
		b.line("(allow network* system-socket)")
		b.list("(allow mach-lookup", "(global-name %q)", seatbeltNetMach)
		b.line("; not the host's loopback: toold's own listeners are there")
		b.line(`(deny network-outbound (remote ip "localhost:*"))`)
	} else {
		b.line("; none: the sandbox does not allow it")
	}
	if len(p.Private) > 0 {
		b.section("toold's own files: no run reads or writes them, whatever allowed it above")
		var priv []string
		for i, f := range p.Private {
			priv = append(priv, b.param("subpath", fmt.Sprintf("TOOLD_%d", i), f))
		}
		b.list("(deny file-read* file-write*", "%s", priv)
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

// seatbeltPolicy is the policy of one run of program (absolute) with the
// private temporary directory tmp; real resolves a path's symbolic links
// (realPath on a Mac; the tests pass paths that are real already).
func (sb *sandbox) seatbeltPolicy(program, workspace, tmp string, real func(string) string) seatbeltPolicy {
	p := seatbeltPolicy{Workspace: real(workspace), Writable: sb.writable, Network: sb.network, Tmp: real(tmp)}
	for _, d := range sb.roPaths {
		p.ReadOnly = append(p.ReadOnly, real(d))
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
