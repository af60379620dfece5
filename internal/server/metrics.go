package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ready    prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	f := promauto.With(reg)
	return &httpMetrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_http_requests_total",
			Help: "HTTP requests by method, route pattern and status code."}, []string{"method", "route", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "toold_http_request_duration_seconds",
			Help:    "HTTP request duration by method and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}},
			[]string{"method", "route"}),
		ready: f.NewGauge(prometheus.GaugeOpts{Name: "toold_ready",
			Help: "1 while toold accepts calls, 0 once it is draining."}),
	}
}

func (m *httpMetrics) observe(method, route string, code int, d time.Duration) {
	switch method { // a label must not take any value a client invents
	case "GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH":
	default:
		method = "OTHER"
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
}
