package launch

// Linux's parts of the platform seam (platform.go) that the other OSes
// fill too: its modes, and nothing of its own to learn or add per sandbox
// beyond what contain_linux.go does.

// osModes are the containment modes this OS provides.
var osModes = []Mode{ModeAuto, ModeNone, ModeNamespaces, ModeBwrap}

// platformHost is what macOS and Windows learn about their own modes;
// Linux keeps that on host itself.
type platformHost struct{}

// platformSandbox is what a sandbox holds for macOS's and Windows's modes.
type platformSandbox struct{}

// finishPlatform adds nothing here: contain.go's enforcement is Linux's.
func (*sandbox) finishPlatform(*host) {}

// ownTemp does nothing more to a run's temporary directory than tempDir.
func (*sandbox) ownTemp(string) error { return nil }
