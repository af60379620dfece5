package sanitize

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// The build machines are shared: wall-clock MB/s moves with the load of
// other jobs. Alongside b.SetBytes' figure, benchmarks report cpuMB/s, the
// bytes processed per second of CPU time of the benchmarking thread
// (RUSAGE_THREAD), which is the per-core throughput whatever else runs.

const rusageThread = 1 // RUSAGE_THREAD, Linux

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuLoop runs fn b.N times (via b.Loop) on a locked thread and reports
// cpuMB/s for n bytes per call.
func cpuLoop(b *testing.B, n int, fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(n))
	b.ReportAllocs()
	start, iters := threadCPU(), 0
	for b.Loop() {
		fn()
		iters++
	}
	if cpu := threadCPU() - start; cpu > 0 {
		b.ReportMetric(float64(n)*float64(iters)/cpu.Seconds()/1e6, "cpuMB/s")
	}
}
