//go:build !linux

package launch

// What macOS and Windows both lack of Linux's launcher, for the platform
// seam (platform.go): no cgroups (a Windows run's Job Object is its
// runCgroup, platform_windows.go; macOS has none).

// cgroupHost stands for Linux's cgroup hierarchy, which these OSes do not
// have.
type cgroupHost struct{}

// findCgroups finds none.
func findCgroups() *cgroupHost { return nil }

func (*cgroupHost) usable() bool              { return false }
func (*cgroupHost) has(string) (string, bool) { return "", false }
func (*cgroupHost) descendants() string       { return "" }
func (*cgroupHost) close()                    {}
