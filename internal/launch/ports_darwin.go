package launch

import "slices"

// portGuard is Linux's (ports_linux.go); macOS's port guard is in every
// profile (seatbelt.go), its ports kept by platformHost.
type portGuard struct{}

// protected is the ports ProtectPorts took (nil before).
func (p *platformHost) protected() []int {
	if v := p.ports.Load(); v != nil {
		return slices.Clone(*v)
	}
	return nil
}
