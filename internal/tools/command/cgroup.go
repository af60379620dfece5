package command

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Per-run cgroups. Every program toold starts gets cgroups of its own when
// toold can create them (root, or a subtree delegated to it): a cgroup v2
// leaf, which tracks every descendant (cgroup.kill ends them all when the
// run ends, setsid and a cleared environment notwithstanding) and carries
// memory.max, pids.max and cpu.max when the hierarchy has those
// controllers; and, for the controllers the v2 hierarchy lacks (hybrid
// hosts), a leaf in each v1 hierarchy toold is in (memory, pids, cpu). The
// limits then hold for the whole run, not per process.
//
// The child is moved into its leaves while it is stopped after its execve
// (see startStopped), before its first instruction, by a goroutine with
// toold's own credentials (the launcher thread may run as the run-as uid).

// cgroupHost is what the host offers, learnt once per Set.
type cgroupHost struct {
	v2     string          // parent of the per-run v2 leaves; "" when none
	v2ctl  map[string]bool // controllers enabled for the leaves
	v1     map[string]string
	reason string // why some or all are missing
}

// cgroupControllers are the controllers toold limits a run with.
var cgroupControllers = []string{"memory", "pids", "cpu"}

// findCgroups finds toold's cgroups and makes a parent for the runs' leaves
// in each that is writable.
func findCgroups() *cgroupHost {
	ch := &cgroupHost{v2ctl: map[string]bool{}, v1: map[string]string{}}
	own, err := ownCgroups()
	if err != nil {
		ch.reason = err.Error()
		return ch
	}
	mounts, err := cgroupMounts()
	if err != nil {
		ch.reason = err.Error()
		return ch
	}
	var why []string
	name := fmt.Sprintf("toold-%d", os.Getpid())
	if m, ok := mounts["cgroup2"]; ok {
		if dir, err := ch.setupV2(filepath.Join(m, own[""]), name); err != nil {
			why = append(why, "cgroup v2: "+err.Error())
		} else {
			ch.v2 = dir
		}
	} else {
		why = append(why, "no cgroup v2 mount")
	}
	for _, c := range cgroupControllers {
		if ch.v2ctl[c] {
			continue
		}
		m, ok := mounts[c]
		if !ok {
			why = append(why, c+": no controller")
			continue
		}
		dir := filepath.Join(m, own[c], name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			why = append(why, fmt.Sprintf("%s (v1): %v", c, err))
			continue
		}
		ch.v1[c] = dir
	}
	ch.reason = strings.Join(why, "; ")
	return ch
}

// setupV2 makes dir/name, the parent of the runs' leaves, with every
// controller of cgroupControllers that dir offers enabled for the leaves.
// When dir holds processes (toold itself, under systemd), controllers can
// only be enabled below it after toold moves into a leaf of its own, the
// usual way to use a delegated subtree.
func (ch *cgroupHost) setupV2(dir, name string) (string, error) {
	parent := filepath.Join(dir, name)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	have, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	var want []string
	for _, c := range strings.Fields(string(have)) {
		if slices.Contains(cgroupControllers, c) {
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return parent, nil
	}
	enable := func(d string) error {
		return os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(strings.Join(want, " ")), 0)
	}
	err := enable(dir)
	if errors.Is(err, unix.EBUSY) {
		self := filepath.Join(dir, name+"-self")
		if err = os.Mkdir(self, 0o755); err == nil || errors.Is(err, os.ErrExist) {
			if err = os.WriteFile(filepath.Join(self, "cgroup.procs"), []byte("0"), 0); err == nil {
				err = enable(dir)
			}
		}
	}
	if err == nil {
		err = enable(parent)
	}
	if err != nil {
		return parent, nil //nolint:nilerr // no controllers: the leaf still tracks and kills
	}
	for _, c := range want {
		ch.v2ctl[c[1:]] = true
	}
	return parent, nil
}

// usable says whether a run can get a cgroup at all.
func (ch *cgroupHost) usable() bool { return ch != nil && (ch.v2 != "" || len(ch.v1) > 0) }

// has says whether controller c limits a run, and where.
func (ch *cgroupHost) has(c string) (string, bool) {
	if ch == nil {
		return "", false
	}
	if ch.v2ctl[c] {
		return "cgroup v2", true
	}
	if _, ok := ch.v1[c]; ok {
		return "cgroup v1", true
	}
	return "", false
}

// close removes the parents (empty by then).
func (ch *cgroupHost) close() {
	if ch == nil {
		return
	}
	if ch.v2 != "" {
		_ = unix.Rmdir(ch.v2)
	}
	for _, d := range ch.v1 {
		_ = unix.Rmdir(d)
	}
}

// callLimits are what a run's cgroups enforce; 0 or less: not limited.
type callLimits struct {
	memory int64
	pids   int
	cpus   float64
}

// runCgroup is one run's leaves.
type runCgroup struct {
	dirs []string // the v2 leaf first, when there is one
	v2   bool
}

// newRun makes a run's leaves and writes their limits. On error nothing is
// left behind.
func (ch *cgroupHost) newRun(id string, lim callLimits) (*runCgroup, error) {
	rc := &runCgroup{}
	mk := func(parent string) (string, error) {
		d := filepath.Join(parent, id)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
		rc.dirs = append(rc.dirs, d)
		return d, nil
	}
	var errs []error
	set := func(dir, file, value string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
		}
	}
	quota := func(period int) int { return max(1000, int(lim.cpus*float64(period))) }
	if ch.v2 != "" {
		d, err := mk(ch.v2)
		if err != nil {
			return nil, fmt.Errorf("creating the run's cgroup: %w", err)
		}
		rc.v2 = true
		if ch.v2ctl["memory"] && lim.memory > 0 {
			set(d, "memory.max", strconv.FormatInt(lim.memory, 10))
			set(d, "memory.swap.max", "0")
		}
		if ch.v2ctl["pids"] && lim.pids > 0 {
			set(d, "pids.max", strconv.Itoa(lim.pids))
		}
		if ch.v2ctl["cpu"] && lim.cpus > 0 {
			set(d, "cpu.max", fmt.Sprintf("%d 100000", quota(100000)))
		}
	}
	for _, c := range cgroupControllers {
		parent, ok := ch.v1[c]
		if !ok {
			continue
		}
		d, err := mk(parent)
		if err != nil {
			errs = append(errs, err)
			break
		}
		switch {
		case c == "memory" && lim.memory > 0:
			set(d, "memory.limit_in_bytes", strconv.FormatInt(lim.memory, 10))
			_ = os.WriteFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(lim.memory, 10)), 0)
		case c == "pids" && lim.pids > 0:
			set(d, "pids.max", strconv.Itoa(lim.pids))
		case c == "cpu" && lim.cpus > 0:
			set(d, "cpu.cfs_period_us", "100000")
			set(d, "cpu.cfs_quota_us", strconv.Itoa(quota(100000)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		rc.remove()
		return nil, fmt.Errorf("setting the run's cgroup limits: %w", err)
	}
	return rc, nil
}

// place moves pid into every leaf. It runs on a fresh goroutine, so on a
// thread with toold's credentials, whatever thread calls it.
func (rc *runCgroup) place(pid int) error {
	if rc == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for _, d := range rc.dirs {
			if err = os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				err = fmt.Errorf("moving the command into its cgroup %s: %w", d, err)
				break
			}
		}
		done <- err
	}()
	return <-done
}

// kill ends every process in the run's cgroups and waits (up to killWait)
// for them to be gone. With cgroup.kill (v2, Linux 5.14) the kernel kills
// them all at once, forks in flight included; otherwise the members are
// signalled until none is left (the pids limit bounds a fork storm).
func (rc *runCgroup) kill() {
	if rc == nil || len(rc.dirs) == 0 {
		return
	}
	d := rc.dirs[0]
	useKill := rc.v2 && os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0) == nil
	deadline := time.Now().Add(killWait)
	for time.Now().Before(deadline) {
		pids := members(d)
		if len(pids) == 0 {
			return
		}
		if !useKill {
			for _, p := range pids {
				_ = unix.Kill(p, unix.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// members lists the pids in a cgroup.
func members(dir string) []int {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, err := strconv.Atoi(sc.Text()); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// remove kills what is left and removes the leaves.
func (rc *runCgroup) remove() {
	if rc == nil {
		return
	}
	rc.kill()
	for _, d := range rc.dirs {
		for range 100 {
			if err := unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			for _, p := range members(d) {
				_ = unix.Kill(p, unix.SIGKILL)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// ownCgroups reads /proc/self/cgroup: controller ("" for v2) → path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// cgroupMounts reads /proc/self/mountinfo: "cgroup2" or a v1 controller →
// its mount point. Only mounts of a hierarchy's root are used.
func cgroupMounts() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if _, seen := out["cgroup2"]; !seen {
				out["cgroup2"] = f[4]
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if slices.Contains(cgroupControllers, o) {
					if _, seen := out[o]; !seen {
						out[o] = f[4]
					}
				}
			}
		}
	}
	return out, nil
}
