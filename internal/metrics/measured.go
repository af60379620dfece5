package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toold/toold/internal/registry"
)

// Measured is a tool's latency as this replica measured it since start,
// read from its duration histogram (every outcome), beside its documented
// bounds: what the console shows against the targets.
type Measured struct {
	Calls    uint64  `json:"calls"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	TargetMS float64 `json:"target_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// Measured estimates the tool's p50 and p99 from its histogram as
// Prometheus' histogram_quantile does (linear within a bucket; a quantile
// past the last finite bucket is that bucket's bound). ok is false for a
// tool these metrics do not know. Reading costs a histogram snapshot per
// status; nothing is added to the call path.
func (m *Tools) Measured(e *registry.Entry) (Measured, bool) {
	s, ok := (*m.byTool.Load())[e.Spec.Name]
	if !ok {
		return Measured{}, false
	}
	var bounds []float64
	var counts []uint64
	var total uint64
	for _, o := range s.duration {
		h, ok := o.(prometheus.Metric)
		if !ok {
			continue
		}
		var d dto.Metric
		if h.Write(&d) != nil || d.Histogram == nil {
			continue
		}
		total += d.Histogram.GetSampleCount()
		for i, b := range d.Histogram.GetBucket() {
			if i == len(bounds) {
				bounds = append(bounds, b.GetUpperBound())
				counts = append(counts, 0)
			}
			counts[i] += b.GetCumulativeCount()
		}
	}
	l := e.Spec.Limits
	out := Measured{Calls: total, TargetMS: roundMS(l.Target.Seconds()), MaxMS: roundMS(l.Max.Seconds())}
	if total > 0 {
		out.P50MS = roundMS(quantile(0.5, bounds, counts, total))
		out.P99MS = roundMS(quantile(0.99, bounds, counts, total))
	}
	return out, true
}

// quantile is histogram_quantile over cumulative bucket counts.
func quantile(q float64, bounds []float64, cum []uint64, total uint64) float64 {
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for i, b := range bounds {
		if float64(cum[i]) >= rank {
			if math.IsInf(b, 1) {
				return lower
			}
			in := float64(cum[i] - below)
			if in == 0 {
				return b
			}
			return lower + (b-lower)*(rank-float64(below))/in
		}
		lower, below = b, cum[i]
	}
	return lower // past every finite bucket: its bound
}

// roundMS turns seconds into milliseconds to the microsecond: the estimate
// is no finer than its bucket, and float noise ("2.4850000000000003")
// helps no reader.
func roundMS(s float64) float64 { return math.Round(s*1e6) / 1e3 }
