// Package tracingtest records toold's spans in memory for tests, with the
// SDK's in-memory exporter behind the same Setup toold runs, and draws a
// trace as an indented tree that tests compare.
package tracingtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toold/toold/internal/tracing"
)

// Recorder holds a tracer whose spans end up in memory.
type Recorder struct {
	Tracing  *tracing.Tracing
	exporter *tracetest.InMemoryExporter
}

// New starts tracing into memory, sampling every span (env may set
// OTEL_* variables to test other samplers); it stops with the test.
func New(tb testing.TB, env map[string]string) *Recorder {
	tb.Helper()
	exp := tracetest.NewInMemoryExporter()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	t, err := tracing.Setup(context.Background(), tracing.Config{Sampler: "always_on"}, lookup,
		tracing.Options{Exporter: exp, Sync: true, Version: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = t.Shutdown(context.Background()) })
	return &Recorder{Tracing: t, exporter: exp}
}

// Tracer is the tracer to hand to the code under test.
func (r *Recorder) Tracer() trace.Tracer { return r.Tracing.Tracer() }

// Spans are the ended spans so far.
func (r *Recorder) Spans() tracetest.SpanStubs { return r.exporter.GetSpans() }

// Reset forgets the spans so far.
func (r *Recorder) Reset() { r.exporter.Reset() }

// Await waits until a span of each name has ended, and returns the one
// named first.
func (r *Recorder) Await(tb testing.TB, name string, more ...string) tracetest.SpanStub {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := r.Spans()
		found := map[string]int{}
		for i, s := range spans {
			if _, ok := found[s.Name]; !ok {
				found[s.Name] = i
			}
		}
		all := true
		for _, n := range append([]string{name}, more...) {
			if _, ok := found[n]; !ok {
				all = false
			}
		}
		if all {
			return spans[found[name]]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not every span of %q ended; spans: %s", append([]string{name}, more...), names(spans))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Tree draws the trace of id: one line per span, "name (kind)" plus its
// status when it failed, children indented under their parent in the
// order they started. A span whose parent is not in the trace (the
// caller's, remote) is a root.
func (r *Recorder) Tree(id trace.TraceID) string {
	var in []tracetest.SpanStub
	for _, s := range r.Spans() {
		if s.SpanContext.TraceID() == id {
			in = append(in, s)
		}
	}
	slices.SortStableFunc(in, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	known := map[trace.SpanID]bool{}
	for _, s := range in {
		known[s.SpanContext.SpanID()] = true
	}
	var b strings.Builder
	var draw func(parent trace.SpanID, depth int)
	draw = func(parent trace.SpanID, depth int) {
		for _, s := range in {
			p := s.Parent.SpanID()
			if !known[p] {
				p = trace.SpanID{}
			}
			if p != parent {
				continue
			}
			fmt.Fprintf(&b, "%s%s (%s)", strings.Repeat("  ", depth), s.Name, s.SpanKind)
			if s.Status.Code.String() == "Error" {
				b.WriteString(" error")
			}
			b.WriteByte('\n')
			draw(s.SpanContext.SpanID(), depth+1)
		}
	}
	draw(trace.SpanID{}, 0)
	return b.String()
}

// Attr is a span's attribute's value as a string ("" when absent).
func Attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}
