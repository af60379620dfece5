package state

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	duration   *prometheus.HistogramVec
	errors     *prometheus.CounterVec
	connected  prometheus.Gauge
	reconnects prometheus.Counter
	// unavailable is when an operation last found the store unavailable
	// (Unix nanoseconds; 0: never).
	unavailable atomic.Int64
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "toold_store_operation_duration_seconds",
			Help:    "Latency of state store (NATS JetStream) operations, by operation.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}},
			[]string{"op"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_store_errors_total",
			Help: "State store operations that failed, by operation and reason (unavailable, full, other)."},
			[]string{"op", "reason"}),
		connected: f.NewGauge(prometheus.GaugeOpts{Name: "toold_store_connected",
			Help: "1 while toold is connected to its state store."}),
		reconnects: f.NewCounter(prometheus.CounterOpts{Name: "toold_store_reconnects_total",
			Help: "Times toold reconnected to its state store after losing it."}),
	}
}

func (m *metrics) observe(op string, start time.Time, err error) {
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		return
	}
	reason := "other"
	switch {
	case errors.Is(err, ErrUnavailable):
		reason = "unavailable"
		m.unavailable.Store(time.Now().UnixNano())
	case errors.Is(err, ErrFull):
		reason = "full"
	}
	m.errors.WithLabelValues(op, reason).Inc()
}
