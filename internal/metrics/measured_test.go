package metrics

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, 1}
	tests := []struct {
		name  string
		cum   []uint64
		total uint64
		q     float64
		want  float64
	}{
		{"all in the first bucket", []uint64{10, 10, 10, 10}, 10, 0.5, 0.0005},
		{"half in the second", []uint64{0, 10, 20, 20}, 20, 0.5, 0.01},
		{"interpolated", []uint64{0, 0, 100, 100}, 100, 0.99, 0.01 + 0.09*0.99},
		{"past the last finite bound", []uint64{0, 0, 0, 1}, 10, 0.99, 1},
	}
	for _, tt := range tests {
		if got := quantile(tt.q, bounds, tt.cum, tt.total); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: quantile %v = %v, want %v", tt.name, tt.q, got, tt.want)
		}
	}
}
