//go:build !linux

package sanitize

import "time"

// threadCPU is 0: RUSAGE_THREAD is Linux's, so benchmarks here report
// wall-clock MB/s only.
func threadCPU() time.Duration { return 0 }
