//go:build !unix

package consult

import "errors"

// mkfifo: named pipes are a Unix file (fake-ai, a shell script, is
// Unix's too).
func mkfifo(string) error { return errors.New("no named pipes on this system") }
