package state

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockedByte is where the lock lies: far past the holder's line, which a
// second toold reads to say who holds the directory (Windows locks bar
// reads of the bytes they cover).
const lockedByte = 1 << 62

// lockFile takes an exclusive lock on one byte of f without waiting;
// Windows drops it when toold exits, however it exits.
func lockFile(f *os.File) error {
	ol := windows.Overlapped{Offset: uint32(lockedByte & 0xffffffff), OffsetHigh: uint32(lockedByte >> 32)}
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
}

// unlockFile gives the lock back.
func unlockFile(f *os.File) {
	ol := windows.Overlapped{Offset: uint32(lockedByte & 0xffffffff), OffsetHigh: uint32(lockedByte >> 32)}
	_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
