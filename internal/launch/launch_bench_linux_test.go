package launch

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkLaunchP50 is the per-run cost of containment: /bin/true through
// a command tool's Runner in each mode (per-run cgroups, the minimal root's
// mount namespace and /tmp, rlimits, pipes), each run alternated with a
// bare os/exec run of the same binary, so both see the same machine. It
// reports the medians and their ratio:
//
//	go test ./internal/launch/ -run '^$' -bench LaunchP50 -benchtime 400x
func BenchmarkLaunchP50(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	for _, m := range modes {
		b.Run(string(m), func(b *testing.B) {
			r := sandboxed(b, m, Config{Rlimits: Rlimits{Processes: -1}}, Sandbox{})
			spec := RunSpec{Argv: []string{truePath}}
			var bare, contained []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := exec.Command(truePath).Run(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				res, err := r.Run(context.Background(), spec)
				if err != nil || !res.OK {
					b.Fatal(res, err)
				}
				bare, contained = append(bare, t1.Sub(t0)), append(contained, time.Since(t1))
			}
			pb, pc := median(bare), median(contained)
			b.ReportMetric(float64(pb.Microseconds()), "bare-p50-µs")
			b.ReportMetric(float64(pc.Microseconds()), "p50-µs")
			b.ReportMetric(float64(pc)/float64(pb), "x-bare")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
