//go:build !linux

package launch

import (
	"errors"
	"runtime"
)

// portGuard is Linux's (ports_linux.go).
type portGuard struct{}

// ErrNoPortGuard says that toold's ports cannot be taken from its
// programs here.
var ErrNoPortGuard = errors.New("no port guard on " + runtime.GOOS + " (Landlock is Linux's)")

// ProtectPorts cannot hold on this OS: it returns ErrNoPortGuard.
func (l *Launcher) ProtectPorts(...int) error { return ErrNoPortGuard }
