//go:build !linux

package launch

// What macOS and Windows lack of Linux's launcher, for the platform seam
// (platform.go): no per-run cgroups, no rlimits applied to a child, no
// sandbox shim, no /proc to find a run's escaped processes by their marker,
// and no containment but an explicit none yet.

// hasRlimits: a child's rlimits cannot be set here yet (no prlimit, no hook
// between fork and exec in os/exec); every result says so.
const hasRlimits = false

// Shim returns at once: only Linux's containment namespaces re-runs toold
// as a shim. main calls it on every OS, so the order there is one.
func Shim() {}

// cgroupHost stands for per-run resource groups, which this OS does not
// give toold (Windows's Job Objects will be its own).
type cgroupHost struct{}

// findCgroups finds none.
func findCgroups() *cgroupHost { return nil }

func (*cgroupHost) usable() bool              { return false }
func (*cgroupHost) has(string) (string, bool) { return "", false }
func (*cgroupHost) descendants() string       { return "" }
func (*cgroupHost) close()                    {}
func (*runCgroup) remove()                    {}
func (*runCgroup) kill() bool                 { return true }
func (*killer) sweepMarked()                  {}
func (Rlimits) list(bool) []rlimit            { return nil }
func (*Launcher) prepareRun(*sandbox, string) (runSetup, *runCgroup, func(), error) {
	return runSetup{}, nil, func() {}, nil
}

// runCgroup is a run's resource group: none here.
type runCgroup struct{}
