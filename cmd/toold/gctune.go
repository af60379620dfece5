package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/cgroups"
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
	mountinfo, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return 0, "", false
	}
	groups, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", false
	}
	mounts := cgroups.ParseMounts(mountinfo)
	limit = math.MaxInt64
	for _, g := range cgroups.ParseGroups(groups) {
		file := "memory.max"
		i := slices.IndexFunc(mounts, func(m cgroups.Mount) bool { return m.V2 })
		if !g.V2 {
			if !g.Has("memory") {
				continue
			}
			file = "memory.limit_in_bytes"
			i = slices.IndexFunc(mounts, func(m cgroups.Mount) bool { return !m.V2 && m.Has("memory") })
		}
		if i < 0 {
			continue
		}
		for dir := range mounts[i].Dirs(g.Path) {
			f := filepath.Join(root, dir, file)
			if v, ok := readLimit(f); ok && v < limit {
				limit, from = v, f
			}
		}
	}
	return limit, from, from != ""
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
