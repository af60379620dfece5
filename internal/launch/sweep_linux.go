package launch

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// sweepMarked kills processes that left the group (setsid) but still carry
// the run's TOOLD_RUN_ID: containment none has no namespace to end them.
// Best effort: a process that cleared its environment escapes it.
func (k *killer) sweepMarked() {
	marker := []byte("\x00TOOLD_RUN_ID=" + k.runID + "\x00")
	for range 3 {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, env...), marker) {
				continue
			}
			found = true
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
