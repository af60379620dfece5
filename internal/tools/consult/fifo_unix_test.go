//go:build unix

package consult

import "syscall"

// mkfifo makes a named pipe: the barrier's way to hear from fake-ai.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o666) }
