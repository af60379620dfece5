package sanitize

import (
	"runtime"
	"testing"
)

// The build machines are shared: wall-clock MB/s moves with the load of
// other jobs. Alongside b.SetBytes' figure, benchmarks report cpuMB/s, the
// bytes processed per second of CPU time of the benchmarking thread
// (RUSAGE_THREAD), which is the per-core throughput whatever else runs.

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
	if cpu := threadCPU() - start; cpu > 0 { // 0 where there is no thread clock: no metric
		b.ReportMetric(float64(n)*float64(iters)/cpu.Seconds()/1e6, "cpuMB/s")
	}
}
