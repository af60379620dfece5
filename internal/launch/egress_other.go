//go:build !linux

package launch

import "errors"

// netModes: no mode here gives a run a network namespace of its own, so no
// sandbox here takes an allow-list (egress.go) yet.
var netModes = map[Mode]bool{}

// list: no port guard here.
func (*portGuard) list() []int { return nil }

// attachNet is never reached here: compileNetwork refuses every mode.
func (*sandbox) attachNet(*runSetup) error {
	return errors.New("no egress proxy on this platform")
}

// started has nothing to close here.
func (*netRun) started() {}

// errNoSelf is Linux's (the bwrap helper).
var errNoSelf = errors.New("no egress helper on this platform")
