package cgroups

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	groups := ParseGroups([]byte("9:name=systemd:/\n4:memory:/pod/c\n3:cpu,cpuacct:/pod\n0::/user.slice/x\nbad line\n2:pids:relative\n"))
	want := []Group{{Controllers: "name=systemd", Path: "/"}, {Controllers: "memory", Path: "/pod/c"},
		{Controllers: "cpu,cpuacct", Path: "/pod"}, {V2: true, Path: "/user.slice/x"}}
	if !slices.Equal(groups, want) {
		t.Fatalf("groups %+v, want %+v", groups, want)
	}
	if !groups[2].Has("cpu") || groups[2].Has("cpuacct,") || groups[1].Has("mem") {
		t.Error("Has matches whole controller names only")
	}
	mounts := ParseMounts([]byte(`30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
31 25 0:27 /pod /sys/fs/cgroup/with\040space rw - cgroup2 cgroup2 rw,nsdelegate
32 25 0:28 / /proc rw - proc proc rw
`))
	if len(mounts) != 2 || !mounts[0].Has("memory") || mounts[0].V2 || !mounts[1].V2 || mounts[1].Point != "/sys/fs/cgroup/with space" || mounts[1].Root != "/pod" {
		t.Fatalf("mounts %+v", mounts)
	}
	var dirs []string
	for d := range mounts[1].Dirs("/pod/a/b") {
		dirs = append(dirs, d)
	}
	if want := []string{"/sys/fs/cgroup/with space/a/b", "/sys/fs/cgroup/with space/a", "/sys/fs/cgroup/with space"}; !slices.Equal(dirs, want) {
		t.Fatalf("dirs %q, want %q", dirs, want)
	}
}
