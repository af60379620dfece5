//go:build !unix

package fs

import (
	iofs "io/fs"
	"os"
)

// openReadFlags: FIFOs that block on open are a Unix concern.
const openReadFlags = os.O_RDONLY

// dirKey has no portable file identity to offer; callers fall back to the
// cleaned path.
func dirKey(iofs.FileInfo) (string, bool) { return "", false }
