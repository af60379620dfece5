//go:build !linux

package search

import "time"

var start = time.Now()

// threadCPU falls back to the wall clock where the thread's CPU clock is
// not read.
func threadCPU() time.Duration { return time.Since(start) }
