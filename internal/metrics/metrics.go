// Package metrics exports what the pipeline observes about every call, held
// against each tool's documented latency targets: the execution histogram,
// phase timings, call counts and stuck tools. It is a dispatch.Observer; the
// bulkhead gauges live with the bulkheads in package limits.
package metrics

import (
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// Tools records per-tool metrics. Observe and Stuck are safe for
// concurrent use; Register is not, see there.
type Tools struct {
	duration *prometheus.HistogramVec
	phase    *prometheus.HistogramVec
	calls    *prometheus.CounterVec
	stuck    *prometheus.GaugeVec
	target   *prometheus.GaugeVec
	// byTool holds each tool's series, resolved once: looking a series up
	// by its labels hashes them, several times per call otherwise. Tools
	// come and go while serving, so the map is replaced, never changed.
	byTool atomic.Pointer[map[string]*series]
}

type series struct {
	duration map[dispatch.Status]prometheus.Observer
	calls    map[dispatch.Status]prometheus.Counter
	queue    prometheus.Observer
	execute  prometheus.Observer
	sanitize prometheus.Observer
	stuck    prometheus.Gauge
}

var _ dispatch.Observer = (*Tools)(nil)

// New registers the tool metrics for the registry's tools on reg (tools
// added later get theirs through Register). The duration histogram's
// buckets include every target, max and timeout of the design's table, of
// every registered tool, and of known: the limits tools added later will
// have, as far as the configuration says (its categories, its upstream
// servers). A histogram's buckets are fixed once it exists, and "above
// target" is exact only at a bucket boundary.
func New(reg prometheus.Registerer, r *registry.Registry, known ...tools.Limits) *Tools {
	f := promauto.With(reg)
	m := &Tools{
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "toold_tool_execution_duration_seconds",
			Help:    "Duration of tool calls from acceptance to envelope, by tool, category and outcome status.",
			Buckets: Buckets(r, known...)}, []string{"tool", "category", "status"}),
		phase: f.NewHistogramVec(prometheus.HistogramOpts{Name: "toold_tool_phase_duration_seconds",
			Help:    "Time spent in each pipeline phase (queue, execute, sanitize), by tool.",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 2, 5, 10, 30, 60, 120}}, []string{"tool", "phase"}),
		calls: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_tool_calls_total",
			Help: "Tool calls by tool and outcome status."}, []string{"tool", "status"}),
		stuck: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_tool_stuck",
			Help: "Executions still running well after their context was cancelled (up to max_in_flight of them give their slot back; see /readyz)."}, []string{"tool"}),
		target: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_tool_latency_target_seconds",
			Help: "Documented latency bounds per tool: bound=target|max (objectives) and timeout (enforced)."},
			[]string{"tool", "category", "bound"}),
	}
	m.byTool.Store(&map[string]*series{})
	m.Register(r)
	return m
}

// Register creates the series of every tool of r that has none yet (a
// registry snapshot that gained tools); call it with each new snapshot.
// Calls must not overlap (two would each clone the map and one's tools be
// lost): New makes the first before m is shared, and registry.Live calls
// its subscribers one at a time, under its own lock, so a Register
// subscribed there needs no lock of its own. Observe and Stuck may run
// meanwhile: they read the map through the atomic pointer.
func (m *Tools) Register(r *registry.Registry) {
	cur := *m.byTool.Load()
	var next map[string]*series
	for _, e := range r.Entries() {
		if _, ok := cur[e.Spec.Name]; ok {
			continue
		}
		if next == nil {
			next = maps.Clone(cur)
		}
		next[e.Spec.Name] = m.series(e)
	}
	if next != nil {
		m.byTool.Store(&next)
	}
}

// series exports a tool's bounds and creates its series at zero, so
// dashboards and alerts see every tool before its first call.
func (m *Tools) series(e *registry.Entry) *series {
	name, cat, l := e.Spec.Name, string(e.Spec.Category), e.Spec.Limits
	m.target.WithLabelValues(name, cat, "target").Set(l.Target.Seconds())
	m.target.WithLabelValues(name, cat, "max").Set(l.Max.Seconds())
	m.target.WithLabelValues(name, cat, "timeout").Set(l.Timeout.Seconds())
	s := &series{duration: map[dispatch.Status]prometheus.Observer{}, calls: map[dispatch.Status]prometheus.Counter{},
		queue: m.phase.WithLabelValues(name, "queue"), execute: m.phase.WithLabelValues(name, "execute"),
		sanitize: m.phase.WithLabelValues(name, "sanitize"), stuck: m.stuck.WithLabelValues(name)}
	for _, st := range dispatch.Statuses {
		if st != dispatch.StatusNotFound {
			s.calls[st] = m.calls.WithLabelValues(name, string(st))
			s.duration[st] = m.duration.WithLabelValues(name, cat, string(st))
		}
	}
	return s
}

// Observe records one call.
func (m *Tools) Observe(e *registry.Entry, env *dispatch.Envelope) {
	s, ok := (*m.byTool.Load())[e.Spec.Name]
	if !ok {
		return // not from the registry these metrics were built for
	}
	var ex prometheus.Labels // an exemplar: the trace of a recorded call
	if env.TraceSampled && env.TraceID != "" {
		ex = prometheus.Labels{"trace_id": env.TraceID}
	}
	observe(s.duration[env.Status], env.DurationMS/1000, ex)
	s.calls[env.Status].Inc()
	t := env.Timing
	if t.QueuedMS > 0 || t.ExecuteMS > 0 { // it reached the bulkhead
		observe(s.queue, t.QueuedMS/1000, ex)
	}
	if t.ExecuteMS > 0 {
		observe(s.execute, t.ExecuteMS/1000, ex)
	}
	if t.SanitizeMS > 0 {
		observe(s.sanitize, t.SanitizeMS/1000, ex)
	}
}

// observe records v, with the exemplar when there is one (a histogram
// keeps the latest exemplar of each bucket; /metrics shows them in the
// OpenMetrics format).
func observe(o prometheus.Observer, v float64, exemplar prometheus.Labels) {
	if exemplar != nil {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, exemplar)
			return
		}
	}
	o.Observe(v)
}

// Stuck moves the tool's stuck gauge.
func (m *Tools) Stuck(e *registry.Entry, delta int) {
	if s, ok := (*m.byTool.Load())[e.Spec.Name]; ok {
		s.stuck.Add(float64(delta))
	}
}

// Buckets returns the histogram buckets: a fine base for fast tools plus
// every documented bound (see New).
func Buckets(r *registry.Registry, known ...tools.Limits) []float64 {
	b := []float64{.001, .0025, .005, .01, .025, .05, .1, .25}
	add := func(l tools.Limits) {
		for _, d := range []time.Duration{l.Target, l.Max, l.Timeout} {
			if d > 0 {
				b = append(b, d.Seconds())
			}
		}
	}
	for _, c := range tools.Categories {
		add(tools.DefaultLimits(c))
	}
	for _, l := range known {
		add(l)
	}
	if r != nil {
		for _, e := range r.Entries() {
			add(e.Spec.Limits)
		}
	}
	slices.Sort(b)
	return slices.Compact(b)
}
