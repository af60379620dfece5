package server

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ready    prometheus.Gauge

	// series caches each label set's counter and histogram: looking them
	// up by label values hashes and checks every value on every request.
	// The label sets are few (methods are folded, routes are patterns).
	mu     sync.RWMutex
	series map[httpLabels]httpSeries
}

type httpLabels struct {
	method, route string
	code          int
}

type httpSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	f := promauto.With(reg)
	return &httpMetrics{
		series: map[httpLabels]httpSeries{},
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
	k := httpLabels{method, route, code}
	m.mu.RLock()
	ser, ok := m.series[k]
	m.mu.RUnlock()
	if !ok {
		ser = httpSeries{m.requests.WithLabelValues(method, route, strconv.Itoa(code)), m.duration.WithLabelValues(method, route)}
		m.mu.Lock()
		m.series[k] = ser
		m.mu.Unlock()
	}
	ser.requests.Inc()
	ser.duration.Observe(d.Seconds())
}
