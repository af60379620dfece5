package launch

import "errors"

// toold's own listeners on Windows: every job run is an AppContainer
// (job.go), and an AppContainer reaches no address of its own machine —
// loopback and the machine's own LAN addresses alike — whatever its
// network capabilities (Windows's network isolation, which a loopback
// exemption, never made by toold, would lift). So job runs never reach
// toold's ports, and ProtectPorts has nothing to apply; runs of
// containment none are not guarded (Launcher.Exposed lists them).

// portGuard is Linux's (ports_linux.go).
type portGuard struct{}

// ErrNoPortGuard is never returned here: AppContainer isolation is the
// guard of every job run.
var ErrNoPortGuard = errors.New("no port guard")

// protected: no port list here (see the top of this file).
func (*platformHost) protected() []int { return nil }

// ProtectPorts does nothing: job runs cannot reach any port of this
// machine (see the top of this file).
func (l *Launcher) ProtectPorts(...int) error { return nil }

// portsGuarded says whether runs of mode are kept from toold's listeners:
// job runs (AppContainers) are, whatever their network; none's are not.
func (h *host) portsGuarded(mode Mode, _ bool) bool { return mode == ModeJob }
