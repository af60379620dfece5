//go:build unix

package fs

import (
	"fmt"
	iofs "io/fs"
	"os"
	"syscall"
)

// openReadFlags opens without blocking, so a FIFO cannot hang a call before
// the opened descriptor is checked (see openRegular).
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK

// dirKey names a directory by device and inode, so two spellings of one
// directory (through a symlink inside the workspace) share a write lock.
func dirKey(info iofs.FileInfo) (string, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), true
}
