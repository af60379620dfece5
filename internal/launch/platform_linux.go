package launch

// Linux's parts of the platform seam (platform.go) that the other OSes
// fill too: its modes, and nothing of its own to learn or add per sandbox
// beyond what contain_linux.go does.

// osModes are the containment modes this OS provides.
var osModes = []Mode{ModeAuto, ModeNone, ModeNamespaces, ModeBwrap}

// hostRlimits are Linux's rlimits (amd64 and arm64 number them alike).
var hostRlimits = linuxRlimits

// platformHost is what macOS and Windows learn about their own modes;
// Linux keeps that on host itself.
type platformHost struct{}

// platformSandbox is what a sandbox holds for macOS's and Windows's modes.
type platformSandbox struct{}

// finishPlatform adds nothing here: contain.go's enforcement is Linux's.
func (*sandbox) finishPlatform(*host) {}

// ownTemp does nothing more to a run's temporary directory than tempDir.
func (*sandbox) ownTemp(string) error { return nil }

// portsGuarded says whether runs of mode with the network or without are
// kept from toold's listeners: by ProtectPorts' Landlock rule, which
// every mode's launcher applies, or by a network namespace of their own.
// The caller holds h.mu.
func (h *host) portsGuarded(mode Mode, network bool) bool {
	return h.ports != nil || (!network && mode != ModeNone)
}

// sweeps says whether a run's escaped processes are looked for by its
// marker: under none without a cgroup (nothing else ends them).
func (sb *sandbox) sweeps(cg *runCgroup) bool { return sb.mode == ModeNone && cg == nil }

// sweepAtEnd: Linux sweeps only a run that was signalled; a PID namespace
// or the run's cgroup ends the rest with the run.
const sweepAtEnd = false

// closePlatform: nothing of the host's to undo beyond Close's own.
func (*host) closePlatform() {}
