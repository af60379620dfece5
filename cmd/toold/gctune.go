package main

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// toold tunes its own garbage collector at start, each setting only where
// the operator's environment does not set it:
//
//   - GC percent gcPercent instead of Go's 100, unless GOGC is set: a call
//     allocates mostly short-lived garbage (JSON decoding above all; the MCP
//     SDK's decoder allocates a fresh 32 KiB buffer per value), so the
//     collector's cost per call falls about in proportion to the heap it
//     may grow to, while the live heap stays a few MiB. docs/performance.md
//     ("The hot path") has the throughput and RSS measured per setting;
//   - a soft memory limit of memoryLimitShare of the container's memory
//     (cgroup v2 memory.max, or v1 memory.limit_in_bytes, the smallest on
//     the way from toold's cgroup to the root), unless GOMEMLIMIT is set:
//     near the limit the collector runs as often as it must, so the larger
//     GC percent cannot carry toold into the OOM killer.
const (
	gcPercent        = 400
	memoryLimitShare = 0.9
)

// gcSettings are what tuneGC set.
type gcSettings struct {
	percent   int    // the GC percent set; 0 when GOGC was left in force
	limit     int64  // the soft memory limit set, in bytes; 0 when none was
	limitFrom string // the cgroup file the limit was derived from
}

// gcTuned is what main's tuneGC set, for run to log (tests leave it zero).
var gcTuned gcSettings

// logGC tells what tuneGC set, if anything.
func logGC(log *zap.Logger, s gcSettings) {
	if s == (gcSettings{}) {
		return
	}
	var fields []zap.Field
	if s.percent > 0 {
		fields = append(fields, zap.Int("gc_percent", s.percent))
	}
	if s.limit > 0 {
		fields = append(fields, zap.Int64("memory_limit_bytes", s.limit), zap.String("from", s.limitFrom))
	}
	log.Info("garbage collector tuned (GOGC and GOMEMLIMIT override)", fields...)
}

// tuneGC sets the GC percent and memory limit (see above); root is where
// /proc and /sys are found ("/" but in tests).
func tuneGC(lookupEnv func(string) (string, bool), root string) gcSettings {
	var s gcSettings
	if _, ok := lookupEnv("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
		s.percent = gcPercent
	}
	if _, ok := lookupEnv("GOMEMLIMIT"); !ok {
		if limit, from, ok := cgroupMemoryLimit(root); ok {
			s.limit, s.limitFrom = int64(float64(limit)*memoryLimitShare), from
			debug.SetMemoryLimit(s.limit)
		}
	}
	return s
}

// cgroupMemoryLimit is the memory limit of the cgroups this process is in,
// v2 and v1 (a hybrid host mounts both), found through /proc/self/cgroup
// and /proc/self/mountinfo: the smallest limit set on the way from the
// process's cgroup up to its hierarchy's mount, and the file it came from.
// ok is false where no limit is set or none can be read.
func cgroupMemoryLimit(root string) (limit int64, from string, ok bool) {
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return 0, "", false
	}
	groups, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", false
	}
	limit = math.MaxInt64
	for _, g := range parseProcCgroup(groups) {
		var m mount
		var file string
		switch {
		case g.v2:
			m, ok = findMount(mounts, func(m mount) bool { return m.fstype == "cgroup2" })
			file = "memory.max"
		case g.memory:
			m, ok = findMount(mounts, func(m mount) bool { return m.fstype == "cgroup" && hasOption(m.superOptions, "memory") })
			file = "memory.limit_in_bytes"
		default:
			continue
		}
		if !ok {
			continue
		}
		for dir := range m.dirs(g.path) {
			f := filepath.Join(root, dir, file)
			if v, ok := readLimit(f); ok && v < limit {
				limit, from = v, f
			}
		}
	}
	return limit, from, from != ""
}

// procCgroup is a line of /proc/self/cgroup that can hold a memory limit.
type procCgroup struct {
	v2     bool // the unified hierarchy ("0::/path")
	memory bool // a v1 hierarchy with the memory controller
	path   string
}

func parseProcCgroup(b []byte) []procCgroup {
	var out []procCgroup
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		g := procCgroup{path: path.Clean(p)}
		switch {
		case id == "0" && controllers == "":
			g.v2 = true
		case hasOption(controllers, "memory"):
			g.memory = true
		default:
			continue
		}
		out = append(out, g)
	}
	return out
}

// mount is a line of /proc/self/mountinfo.
type mount struct {
	root, point, fstype, superOptions string
}

func findMount(mountinfo []byte, want func(mount) bool) (mount, bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// ID parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		m := mount{root: unescapeMount(a[3]), point: unescapeMount(a[4]), fstype: b[0], superOptions: b[2]}
		if want(m) {
			return m, true
		}
	}
	return mount{}, false
}

// dirs yields the directories of cgroup p and of its ancestors, as far up
// as this mount shows them, the deepest first. A path outside the mount's
// root (a cgroup namespace's view can be) yields the mount point alone.
func (m mount) dirs(p string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		rel, ok := strings.CutPrefix(p, m.root)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && m.root != "/") {
			rel = ""
		}
		rel = path.Clean("/" + rel)
		for {
			if !yield(path.Join(m.point, rel)) || rel == "/" {
				return
			}
			rel = path.Dir(rel)
		}
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasOption(list, opt string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// readLimit reads a memory.max or memory.limit_in_bytes; "max", v1's
// "unlimited" (the largest page count, about 2^63) and anything unreadable
// are no limit.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
