//go:build !linux

package launch

import "errors"

// protectedPorts are the ports ProtectPorts took from every run (macOS;
// none on Windows): the proxy refuses them on every host too.
func (h *host) protectedPorts() []int { return h.plat.protected() }

// attachNet has nothing more to do for seatbelt (openNet listens on
// toold's loopback); no other mode here takes an allow-list.
func (sb *sandbox) attachNet(*runSetup) error {
	if sb.mode == ModeSeatbelt {
		return nil
	}
	return errors.New("no egress proxy for containment " + string(sb.mode))
}

// started has nothing to close here.
func (*netRun) started() {}

// errNoSelf is Linux's (the bwrap helper).
var errNoSelf = errors.New("no egress helper on this platform")
