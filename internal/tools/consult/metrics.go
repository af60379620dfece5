package consult

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics of the consultations, registered once per Set. The tools' own
// series (latency against targets, bulkheads) come from the pipeline; these
// say how each provider fares inside a call.
type metrics struct {
	responses *prometheus.CounterVec
	duration  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		responses: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_consult_responses_total",
			Help: "Consultations of a provider (by consult, consult_many and synthesis), by provider and status: " +
				"success, timeout, not_found, invalid_output, error."}, []string{"provider", "status"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "toold_consult_response_duration_seconds",
			Help:    "Duration of one provider's consultation, waiting for its slot included, by provider.",
			Buckets: []float64{.5, 1, 2, 5, 10, 20, 30, 60, 90, 120, 300, 600}}, []string{"provider"}),
	}
}

func (m *metrics) observe(provider string, s Status, d time.Duration) {
	m.responses.WithLabelValues(provider, string(s)).Inc()
	m.duration.WithLabelValues(provider).Observe(d.Seconds())
}
