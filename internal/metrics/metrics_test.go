package metrics

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"toold/internal/dispatch"
	"toold/internal/registry"
	"toold/internal/tools"
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
}
