package selftest

import (
	"bytes"
	"os"
	"strconv"
)

// scanEnvironments looks for token in the environment of every process
// the run can see (/proc/PID/environ) but its own; it returns where it
// found it, or "".
func scanEnvironments(token string) (string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(b, []byte(token)) {
			return "/proc/" + e.Name() + "/environ", nil
		}
	}
	return "", nil
}
