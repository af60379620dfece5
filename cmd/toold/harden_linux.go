package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Hardening at start, before anything else of toold runs (main calls it
// right after launch.Shim, before flag parsing and configuration):
//
//   - secrets leave the kernel-visible environment: /proc/PID/environ reads
//     the block the process started with, which os.Unsetenv never changes,
//     so the values of secret-looking variables are overwritten in it.
//     toold keeps reading them (the Go runtime's copy is moved to the heap
//     first), for ${VAR} in the configuration and env_allow;
//   - the process becomes non-dumpable (PR_SET_DUMPABLE 0): a process of
//     the same uid — a command under containment none when toold is not
//     root — can no longer read /proc/PID/environ or /proc/PID/mem,
//     ptrace it, or read its file descriptors.
//
// Failures are ignored: on a kernel without /proc the rest of toold works,
// and the containment of commands does not rely on this.
//
// It follows the sandbox shim, never precedes it: a shim process (toold's
// binary re-run inside a user namespace for containment namespaces without
// root) only builds the command's root and execs it, and is kept free of
// toold's own start-up. That the parent is non-dumpable matters to the
// shim's start all the same: the kernel makes the /proc files of a
// non-dumpable process, its not yet exec'd child included, root's, so a
// non-root toold cannot write that child's uid_map (issue 24, item 5).

// secretName matches the names of variables whose values are secrets.
var secretName = regexp.MustCompile(`(?i)(SECRET|TOKEN|PASSW(OR)?D|_KEY$|APIKEY|CREDENTIAL|PRIVATE|SEED)`)

func harden() {
	_ = scrubEnviron(secretName)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// scrubEnviron zeroes, in the environment block the process started with,
// the value of every variable whose name matches. It must run while the
// process is still dumpable: /proc/self/mem is then its own uid's.
func scrubEnviron(match *regexp.Regexp) error {
	var names []string
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && match.MatchString(k) && v != "" {
			// The runtime's strings point into the block: give them a
			// copy of their own before the block is overwritten.
			if err := os.Setenv(k, strings.Clone(v)); err != nil {
				return err
			}
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	start, end, err := environBounds()
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, start); err != nil {
		return err
	}
	changed := false
	for off := 0; off < len(block); {
		n := bytes.IndexByte(block[off:], 0)
		if n < 0 {
			n = len(block) - off
		}
		entry := block[off : off+n]
		if eq := bytes.IndexByte(entry, '='); eq > 0 && match.Match(entry[:eq]) {
			clear(entry[eq+1:])
			changed = true
		}
		off += n + 1
	}
	if !changed {
		return nil
	}
	_, err = mem.WriteAt(block, start)
	return err
}

// environBounds reads env_start and env_end (fields 50 and 51) of
// /proc/self/stat.
func environBounds() (int64, int64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("unexpected /proc/self/stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 49 {
		return 0, 0, fmt.Errorf("/proc/self/stat has %d fields", len(f)+2)
	}
	start, err1 := strconv.ParseInt(f[47], 10, 64)
	end, err2 := strconv.ParseInt(f[48], 10, 64)
	if err1 != nil || err2 != nil || end <= start {
		return 0, 0, fmt.Errorf("bad environment bounds in /proc/self/stat")
	}
	return start, end, nil
}
