package upstream

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the upstream servers' state: connected or not, reconnects,
// tools served, and calls by outcome.
type metrics struct {
	up         *prometheus.GaugeVec
	tools      *prometheus.GaugeVec
	reconnects *prometheus.CounterVec
	calls      *prometheus.CounterVec
}

// outcomes label upstream calls.
var outcomes = []string{"success", "tool_error", "protocol_error", "unavailable", "cancelled"}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		up: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_mcp_upstream_up",
			Help: "1 while toold holds a session with the upstream MCP server, else 0."}, []string{"server"}),
		tools: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_mcp_upstream_tools",
			Help: "Tools of the upstream MCP server that toold serves."}, []string{"server"}),
		reconnects: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_mcp_upstream_reconnects_total",
			Help: "Sessions with the upstream MCP server that ended and were re-established."}, []string{"server"}),
		calls: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_mcp_upstream_calls_total",
			Help: "Calls to the upstream MCP server by outcome."}, []string{"server", "outcome"}),
	}
}

// init creates a server's series at zero, so dashboards see it before its
// first event.
func (m *metrics) init(server string) {
	m.up.WithLabelValues(server).Set(0)
	m.tools.WithLabelValues(server).Set(0)
	m.reconnects.WithLabelValues(server)
	for _, o := range outcomes {
		m.calls.WithLabelValues(server, o)
	}
}

func (m *metrics) call(server, outcome string) { m.calls.WithLabelValues(server, outcome).Inc() }
