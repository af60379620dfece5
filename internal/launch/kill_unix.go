//go:build linux || darwin

package launch

import (
	"time"

	"golang.org/x/sys/unix"
)

// Unix's signals for the platform seam (platform.go): a run is its own
// process group, which SIGTERM and SIGKILL reach whole.

// tmpVars name the run's private temporary directory in its environment.
var tmpVars = []string{"TMPDIR"}

// terminate sends SIGTERM to the run's process group.
func (k *killer) terminate() { _ = unix.Kill(-k.pgid, unix.SIGTERM) }

// killGroup sends SIGKILL to the whole process group until it is empty: a
// fork bomb may add members while the first signal is delivered. Under
// namespaces the group holds the namespace's init, whose death kills every
// process in the namespace; under bwrap it holds bwrap, whose sandbox dies
// with it (--die-with-parent).
func (k *killer) killGroup() {
	for range 50 {
		if err := unix.Kill(-k.pgid, unix.SIGKILL); err != nil {
			break // ESRCH: nobody left in the group
		}
		time.Sleep(time.Millisecond)
	}
}

// signalName names a signal as results carry it ("SIGKILL").
func signalName(s unix.Signal) string { return unix.SignalName(s) }
