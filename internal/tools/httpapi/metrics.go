package httpapi

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics of the HTTP tools, registered once per Set.
type metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
	waits    *prometheus.CounterVec
	waited   *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Set) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		attempts: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_upstream_attempts_total",
			Help: "Requests HTTP tools sent upstream (first attempts and retries), by tool, host and outcome: " +
				"2xx, 3xx, 4xx, 429, 5xx, or error (no answer: connection failure, timeout)."},
			[]string{"tool", "host", "outcome"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "toold_upstream_attempt_duration_seconds",
			Help:    "Duration of one request upstream, from sending to the body read, by tool and host.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2, 3, 5, 10, 30}}, []string{"tool", "host"}),
		waits: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_upstream_waits_total",
			Help: "Waits of HTTP tools before an attempt, by tool and reason: backoff, retry_after (the API's), rate_limit."},
			[]string{"tool", "reason"}),
		waited: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_upstream_wait_seconds_total",
			Help: "Time HTTP tools spent waiting before attempts, by tool and reason."}, []string{"tool", "reason"}),
		refusals: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_upstream_refusals_total",
			Help: "Calls of HTTP tools refused without sending, by tool and reason: circuit_open, rate_limited " +
				"(toold's rate), upstream_rate_limited (a Retry-After that does not fit the deadline)."},
			[]string{"tool", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(&breakerCollector{s: s, desc: prometheus.NewDesc("toold_upstream_circuit_state",
			"State of each upstream host's circuit breaker: 1 for the current state (closed, half_open, open), 0 for the others.",
			[]string{"host", "state"}, nil)})
	}
	return m
}

func (m *metrics) attempt(tool, host, outcome string, d time.Duration) {
	m.attempts.WithLabelValues(tool, host, outcome).Inc()
	m.duration.WithLabelValues(tool, host).Observe(d.Seconds())
}

func (m *metrics) wait(tool, reason string, d time.Duration) {
	m.waits.WithLabelValues(tool, reason).Inc()
	m.waited.WithLabelValues(tool, reason).Add(d.Seconds())
}

// breakerCollector reads each breaker's state at scrape time, so an open
// breaker whose time is up shows half_open without waiting for a call.
type breakerCollector struct {
	s    *Set
	desc *prometheus.Desc
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	hosts := maps.Clone(c.s.hosts)
	c.s.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		state := hosts[name].state()
		for _, s := range []string{"closed", "half_open", "open"} {
			v := 0.0
			if s == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name, s)
		}
	}
}
