package metrics

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

type spec tools.Spec

func (s spec) Spec() tools.Spec                                { return tools.Spec(s) }
func (spec) Execute(context.Context, *tools.Call) (any, error) { return nil, nil }

func registryOf(t *testing.T) *registry.Registry {
	t.Helper()
	r, err := registry.New(registry.Options{}, spec{Name: "t", Description: "d", Category: tools.ExternalAPI,
		Parameters: json.RawMessage(`{"type":"object"}`), Limits: tools.Limits{Target: 1500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestObserveAndTargets(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := registryOf(t)
	m := New(reg, r)
	e, _ := r.Lookup("t")
	m.Observe(e, &dispatch.Envelope{Status: dispatch.StatusSuccess, DurationMS: 12, Timing: dispatch.Timing{QueuedMS: 1, ExecuteMS: 10, SanitizeMS: 0.5}})
	m.Observe(e, &dispatch.Envelope{Status: dispatch.StatusRejected, DurationMS: 0.1})
	m.Stuck(e, 1)
	if got := testutil.ToFloat64(m.calls.WithLabelValues("t", "success")); got != 1 {
		t.Errorf("calls{success} = %v", got)
	}
	if got := testutil.ToFloat64(m.stuck.WithLabelValues("t")); got != 1 {
		t.Errorf("stuck = %v", got)
	}
	if got := testutil.ToFloat64(m.target.WithLabelValues("t", "external_api", "target")); got != 1.5 {
		t.Errorf("target = %v, want the tool's own 1.5s", got)
	}
	if got := testutil.ToFloat64(m.target.WithLabelValues("t", "external_api", "timeout")); got != 10 {
		t.Errorf("timeout = %v, want the category's 10s", got)
	}
	if n := testutil.CollectAndCount(m.phase); n != 3 {
		t.Errorf("%d phase series, want queue, execute, sanitize", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

// TestBucketsHoldEveryBound: every target, max and timeout of the design's
// table and of every tool is a bucket edge.
func TestBucketsHoldEveryBound(t *testing.T) {
	b := Buckets(registryOf(t))
	for _, want := range []float64{0.5, 1, 2, 3, 5, 10, 30, 90, 120, 1.5} {
		if !slices.Contains(b, want) {
			t.Errorf("buckets %v lack %v", b, want)
		}
	}
	if !slices.IsSorted(b) {
		t.Errorf("buckets not sorted: %v", b)
	}
	// Limits tools added later will have (a configured category, an
	// upstream server) are edges too.
	if b := Buckets(registryOf(t), tools.Limits{Target: 1700 * time.Millisecond, Max: 7 * time.Second}); !slices.Contains(b, 1.7) || !slices.Contains(b, 7.0) {
		t.Errorf("buckets %v lack the known 1.7s and 7s", b)
	}
}

// TestRegisterLaterTools: a tool that joins the registry while serving (an
// upstream MCP server's) gets its series and is counted.
func TestRegisterLaterTools(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := registryOf(t)
	m := New(reg, first)
	live := registry.NewLive(first, registry.Options{})
	live.Subscribe(m.Register)
	live.SetSource("up", []tools.Tool{spec{Name: "up.echo", Description: "d", Category: tools.MCP, Source: "up",
		Parameters: json.RawMessage(`{"type":"object"}`)}})
	e, ok := live.Load().Lookup("up.echo")
	if !ok {
		t.Fatal("up.echo was not registered")
	}
	if got := testutil.ToFloat64(m.target.WithLabelValues("up.echo", "mcp", "target")); got != 1 {
		t.Errorf("target = %v, want the mcp category's 1s", got)
	}
	m.Observe(e, &dispatch.Envelope{Status: dispatch.StatusSuccess, DurationMS: 3})
	if got := testutil.ToFloat64(m.calls.WithLabelValues("up.echo", "success")); got != 1 {
		t.Errorf("calls{up.echo,success} = %v", got)
	}
	old, _ := first.Lookup("t")
	m.Observe(old, &dispatch.Envelope{Status: dispatch.StatusSuccess, DurationMS: 3})
	if got := testutil.ToFloat64(m.calls.WithLabelValues("t", "success")); got != 1 {
		t.Errorf("the first tool's series were lost: calls = %v", got)
	}
}

// TestExemplars: a recorded (sampled) call leaves its trace id on the
// duration bucket it fell in; an unsampled one leaves none.
func TestExemplars(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := registryOf(t)
	m := New(reg, r)
	e, _ := r.Lookup("t")
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	m.Observe(e, &dispatch.Envelope{Status: dispatch.StatusError, DurationMS: 3, TraceID: "0af7651916cd43dd8448eb211c80319c"})
	m.Observe(e, &dispatch.Envelope{Status: dispatch.StatusSuccess, DurationMS: 12, TraceID: id, TraceSampled: true,
		Timing: dispatch.Timing{ExecuteMS: 10}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, b := range metric.GetHistogram().GetBucket() {
				if ex := b.GetExemplar(); ex != nil {
					for _, l := range ex.GetLabel() {
						found[mf.GetName()] = l.GetValue()
					}
				}
			}
		}
	}
	want := map[string]string{"toold_tool_execution_duration_seconds": id, "toold_tool_phase_duration_seconds": id}
	if !maps.Equal(found, want) {
		t.Errorf("exemplars %v, want %v", found, want)
	}
}
