package main

import (
	"path/filepath"
	"runtime/debug"
	"testing"
)

// The container's memory limit is found on cgroup v2, v1 and hybrid hosts,
// with and without a cgroup namespace, on the process's cgroup or an
// ancestor's; "max", v1's "unlimited" and garbage are no limit.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		dir   string
		limit int64
		from  string // the file, under the case's directory; "" for no limit
	}{
		{"v2", 512 << 20, "sys/fs/cgroup/memory.max"},
		{"v2-max", 0, ""},
		{"v2-nested", 1 << 30, "sys/fs/cgroup/kubepods.slice/pod1/memory.max"},
		{"v1", 256 << 20, "sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"v1-unlimited", 0, ""},
		{"hybrid", 2 << 30, "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes"},
		{"escaped", 100 << 20, "sys/fs/my cgroup/memory.max"},
		{"garbage", 0, ""},
		{"none", 0, ""},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			root := filepath.Join("testdata", "cgroup", tt.dir)
			limit, from, ok := cgroupMemoryLimit(root)
			if ok != (tt.from != "") {
				t.Fatalf("ok %v (limit %d from %q), want %v", ok, limit, from, tt.from != "")
			}
			if !ok {
				return
			}
			if limit != tt.limit || from != filepath.Join(root, tt.from) {
				t.Errorf("%d from %s, want %d from %s", limit, from, tt.limit, filepath.Join(root, tt.from))
			}
		})
	}
}

// toold sets a GC percent and 90% of the container's memory as the soft
// limit, each only where the environment does not set it.
func TestTuneGC(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	for _, tt := range []struct {
		name        string
		env         map[string]string
		dir         string
		wantPercent int   // in force afterwards
		wantLimit   int64 // in force afterwards
		set         gcSettings
	}{
		{"defaults, v2 limit", nil, "v2", gcPercent, 512 << 20 * 9 / 10,
			gcSettings{gcPercent, 512 << 20 * 9 / 10, "testdata/cgroup/v2/sys/fs/cgroup/memory.max"}},
		{"no container limit", nil, "v2-max", gcPercent, 1<<63 - 1, gcSettings{percent: gcPercent}},
		{"GOGC wins", map[string]string{"GOGC": "100"}, "v1", 100, 256 << 20 * 9 / 10,
			gcSettings{0, 256 << 20 * 9 / 10, "testdata/cgroup/v1/sys/fs/cgroup/memory/memory.limit_in_bytes"}},
		{"GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "1GiB"}, "v2", gcPercent, 1<<63 - 1, gcSettings{percent: gcPercent}},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, "v2", 100, 1<<63 - 1, gcSettings{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(1<<63 - 1)
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			got := tuneGC(lookup, filepath.Join("testdata", "cgroup", tt.dir))
			if got != tt.set {
				t.Errorf("tuneGC = %+v, want %+v", got, tt.set)
			}
			if p := debug.SetGCPercent(100); p != tt.wantPercent {
				t.Errorf("GC percent %d, want %d", p, tt.wantPercent)
			}
			if l := debug.SetMemoryLimit(-1); l != tt.wantLimit {
				t.Errorf("memory limit %d, want %d", l, tt.wantLimit)
			}
		})
	}
}
