package egress

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics count what the egress proxies of one toold let through and
// refuse, per tool (the only label: a host would make the series
// unbounded; the host is in the call's result and its span). Made once by
// toold's wiring, on its registry; nil counts nothing.
type Metrics struct {
	refused     *prometheus.CounterVec
	connections *prometheus.CounterVec
	bytes       *prometheus.CounterVec
}

// NewMetrics registers the egress series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		refused: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_egress_refused_total",
			Help: "Destinations a tool's run asked its egress proxy for and was refused (the call's network.refused says which and why)."},
			[]string{"tool"}),
		connections: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_egress_connections_total",
			Help: "Destinations a tool's runs reached through their egress proxy."}, []string{"tool"}),
		bytes: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_egress_bytes_total",
			Help: "Bytes a tool's runs moved through their egress proxy, both ways."}, []string{"tool"}),
	}
}

func (m *Metrics) refuse(tool string) {
	if m != nil {
		m.refused.WithLabelValues(tool).Inc()
	}
}

func (m *Metrics) connect(tool string) {
	if m != nil {
		m.connections.WithLabelValues(tool).Inc()
	}
}

func (m *Metrics) moved(tool string, n int64) {
	if m != nil && n > 0 {
		m.bytes.WithLabelValues(tool).Add(float64(n))
	}
}

// Refused is a tool's refused counter (for tests and dashboards' checks).
func (m *Metrics) Refused(tool string) prometheus.Counter { return m.refused.WithLabelValues(tool) }
