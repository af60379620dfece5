package launch

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toold/toold/internal/cgroups"
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

	// Leaves are reused: making a v1 memory cgroup costs ~0.7 ms here,
	// emptying one for the next run a few µs.
	mu   sync.Mutex
	free []*runCgroup
}

// maxFreeLeaves bounds the leaves kept for reuse.
const maxFreeLeaves = 32

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
	// One name per Set, never reused: a stale toold-<pid> left by a toold
	// that died (its pid since reused, here or by another uid) or another
	// Set of this process closing its parent must not become this one's.
	name := fmt.Sprintf("toold-%d-%s", os.Getpid(), newRunID()[:8])
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

// descendants says how a run's cgroups end what it leaves running, for
// its limits report; "" when there are no cgroups.
func (ch *cgroupHost) descendants() string {
	switch {
	case ch != nil && ch.v2 != "":
		return "cgroup v2 leaf, cgroup.kill when the run ends"
	case ch.usable():
		return "cgroup members killed when the run ends"
	}
	return ""
}

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

// close removes the leaves kept for reuse and the parents (empty by then).
func (ch *cgroupHost) close() {
	if ch == nil {
		return
	}
	ch.mu.Lock()
	free := ch.free
	ch.free = nil
	ch.mu.Unlock()
	for _, rc := range free {
		rc.destroy()
	}
	if ch.v2 != "" {
		_ = unix.Rmdir(ch.v2)
	}
	for _, d := range ch.v1 {
		_ = unix.Rmdir(d)
	}
}

// runCgroup is one run's leaves.
type runCgroup struct {
	ch   *cgroupHost
	dirs []string // the v2 leaf first, when there is one
	v2   bool
	lim  callLimits
}

// newRun returns leaves for a run, with its limits: empty ones a finished
// run gave back, else new ones.
func (ch *cgroupHost) newRun(lim callLimits) (*runCgroup, error) {
	ch.mu.Lock()
	var rc *runCgroup
	if n := len(ch.free); n > 0 {
		rc, ch.free = ch.free[n-1], ch.free[:n-1]
	}
	ch.mu.Unlock()
	id := "run-" + newRunID() // unique among the Sets of this process
	if rc != nil {
		if rc.lim == lim {
			return rc, nil
		}
		if err := rc.setLimits(lim); err == nil {
			return rc, nil
		}
		rc.destroy()
	}
	return ch.makeRun(id, lim)
}

// setLimits rewrites the limits of reused leaves.
func (rc *runCgroup) setLimits(lim callLimits) error {
	if err := rc.ch.limitWrites(rc.dirs, lim); err != nil {
		return err
	}
	rc.lim = lim
	return nil
}

// makeRun makes a run's leaves and writes their limits. On error nothing
// is left behind.
func (ch *cgroupHost) makeRun(id string, lim callLimits) (*runCgroup, error) {
	rc := &runCgroup{ch: ch, lim: lim}
	mk := func(parent string) error {
		d := filepath.Join(parent, id)
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		rc.dirs = append(rc.dirs, d)
		return nil
	}
	if ch.v2 != "" {
		if err := mk(ch.v2); err != nil {
			return nil, fmt.Errorf("creating the run's cgroup: %w", err)
		}
		rc.v2 = true
	}
	for _, c := range cgroupControllers {
		if parent, ok := ch.v1[c]; ok {
			if err := mk(parent); err != nil {
				rc.destroy()
				return nil, fmt.Errorf("creating the run's %s cgroup: %w", c, err)
			}
		}
	}
	if err := ch.limitWrites(rc.dirs, lim); err != nil {
		rc.destroy()
		return nil, fmt.Errorf("setting the run's cgroup limits: %w", err)
	}
	return rc, nil
}

// limitWrites writes lim into leaves laid out as makeRun makes them: the
// v2 leaf first, then one per v1 controller in cgroupControllers order.
// A limit of 0 or less lifts it.
func (ch *cgroupHost) limitWrites(dirs []string, lim callLimits) error {
	var errs []error
	set := func(dir, file, value string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
		}
	}
	val := func(v int64, unlimited string) string {
		if v <= 0 {
			return unlimited
		}
		return strconv.FormatInt(v, 10)
	}
	quota := int64(0)
	if lim.cpus > 0 {
		quota = max(1000, int64(lim.cpus*100000))
	}
	i := 0
	if ch.v2 != "" {
		d := dirs[0]
		i++
		if ch.v2ctl["memory"] {
			set(d, "memory.max", val(lim.memory, "max"))
			set(d, "memory.swap.max", map[bool]string{true: "0", false: "max"}[lim.memory > 0])
		}
		if ch.v2ctl["pids"] {
			set(d, "pids.max", val(int64(lim.pids), "max"))
		}
		if ch.v2ctl["cpu"] {
			set(d, "cpu.max", val(quota, "max")+" 100000")
		}
	}
	for _, c := range cgroupControllers {
		if _, ok := ch.v1[c]; !ok || i >= len(dirs) {
			continue
		}
		d := dirs[i]
		i++
		switch c {
		case "memory":
			// memsw (memory+swap, when accounted) may not be below the
			// limit: lift it, set the limit, then match it.
			v := val(lim.memory, "-1")
			_ = os.WriteFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), []byte("-1"), 0)
			set(d, "memory.limit_in_bytes", v)
			_ = os.WriteFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), []byte(v), 0)
		case "pids":
			set(d, "pids.max", val(int64(lim.pids), "max"))
		case "cpu":
			set(d, "cpu.cfs_period_us", "100000")
			set(d, "cpu.cfs_quota_us", val(quota, "-1"))
		}
	}
	return errors.Join(errs...)
}

// procsFiles opens the leaves' cgroup.procs for place, on toold's side:
// the kernel checks a move against the credentials the file was opened
// with, and the launcher thread may run as the run-as uid, in a mount
// namespace without /sys.
func (rc *runCgroup) procsFiles() ([]int, error) {
	if rc == nil {
		return nil, nil
	}
	var fds []int
	for _, d := range rc.dirs {
		fd, err := unix.Open(filepath.Join(d, "cgroup.procs"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("opening the run's cgroup %s: %w", d, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// place moves pid into every leaf through files procsFiles opened.
func place(fds []int, pid int) error {
	b := []byte(strconv.Itoa(pid))
	for _, fd := range fds {
		if _, err := unix.Write(fd, b); err != nil {
			return fmt.Errorf("moving the command into its cgroups: %w", err)
		}
	}
	return nil
}

// kill ends every process in the run's cgroups and waits (up to killWait)
// for them to be gone; false: some are still there. With cgroup.kill (v2, Linux 5.14) the kernel kills
// them all at once, forks in flight included; otherwise the members are
// signalled until none is left (the pids limit bounds a fork storm).
func (rc *runCgroup) kill() bool {
	if rc == nil || len(rc.dirs) == 0 {
		return true
	}
	d := rc.dirs[0]
	killed := false
	deadline := time.Now().Add(killWait)
	for time.Now().Before(deadline) {
		pids := members(d)
		if len(pids) == 0 {
			return true
		}
		if !killed && rc.v2 {
			killed = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0) == nil
		}
		if !killed {
			for _, p := range pids {
				_ = unix.Kill(p, unix.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
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

// remove kills what is left and gives the leaves back for another run;
// leaves that cannot be emptied are removed.
func (rc *runCgroup) remove() {
	if rc == nil {
		return
	}
	// Every process is in every leaf: the first one empty, all are. But
	// a v1 pids leaf counts the killed till their parent (init, for an
	// orphan) reaps them: a leaf still charged is not handed on.
	if !rc.kill() || !rc.uncharged() {
		go rc.destroy()
		return
	}
	rc.ch.mu.Lock()
	defer rc.ch.mu.Unlock()
	if len(rc.ch.free) < maxFreeLeaves {
		rc.ch.free = append(rc.ch.free, rc)
		return
	}
	go rc.destroy()
}

// uncharged says whether the run's v1 pids leaf counts no process.
func (rc *runCgroup) uncharged() bool {
	if _, ok := rc.ch.v1["pids"]; !ok {
		return true
	}
	for _, d := range rc.dirs {
		if strings.HasPrefix(d, rc.ch.v1["pids"]+"/") {
			b, err := os.ReadFile(filepath.Join(d, "pids.current"))
			return err == nil && strings.TrimSpace(string(b)) == "0"
		}
	}
	return true
}

// destroy kills what is left and removes the leaves.
func (rc *runCgroup) destroy() {
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
	for _, g := range cgroups.ParseGroups(b) {
		if g.V2 {
			out[""] = g.Path
			continue
		}
		for c := range strings.SplitSeq(g.Controllers, ",") {
			out[c] = g.Path
		}
	}
	return out, nil
}

// cgroupMounts reads /proc/self/mountinfo: "cgroup2" or a v1 controller →
// its mount point, the first of each. Only mounts of a hierarchy's root
// are used.
func cgroupMounts() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	add := func(key, point string) {
		if _, seen := out[key]; !seen {
			out[key] = point
		}
	}
	for _, m := range cgroups.ParseMounts(b) {
		switch {
		case m.Root != "/":
		case m.V2:
			add("cgroup2", m.Point)
		default:
			for _, c := range cgroupControllers {
				if m.Has(c) {
					add(c, m.Point)
				}
			}
		}
	}
	return out, nil
}
