//go:build linux || darwin

package selftest

import (
	"os/exec"
	"syscall"
)

// startDetached starts cmd in a session of its own (setsid): out of the
// run's process group, as a program that means to outlive its call would.
func startDetached(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Start()
}
