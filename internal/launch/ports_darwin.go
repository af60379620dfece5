package launch

// portGuard is Linux's (ports_linux.go); macOS's port guard is in every
// profile (seatbelt.go), its ports kept by platformHost.
type portGuard struct{}
