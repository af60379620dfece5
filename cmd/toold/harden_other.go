//go:build !linux

package main

// harden does nothing here yet: the two measures of harden_linux.go are
// Linux's (overwriting the environment block through /proc/self/mem, and
// PR_SET_DUMPABLE). macOS and Windows keep another process of the same user
// out by other means (issue 26 says which hold); toold's containment of
// programs does not rely on either.
func harden() {}
