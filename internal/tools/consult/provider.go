package consult

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// asker is one kind of provider: a CLI run per consultation, or a model
// API. It answers within q.timeout and never returns before stopping
// what it started.
type asker interface {
	ask(ctx context.Context, q query) outcome
	// probe checks availability within timeout.
	probe(ctx context.Context, timeout time.Duration) availability
	// where says where the provider runs, for discovery: containment or
	// endpoint.
	where() map[string]any
}

// query is one consultation of one provider.
type query struct {
	prompt string
	model  string
	// timeout is what is left for the answer.
	timeout time.Duration
	// emit, when set, receives the answer's text as it arrives.
	emit func(data string)
}

// outcome is what an asker found.
type outcome struct {
	status   Status
	output   string
	err      string
	model    string // the model that answered, when the provider says
	exitCode *int
	meta     map[string]any
}

// provider is a configured provider with its slots: runs beyond
// MaxInFlight wait for one within their own timeout.
type provider struct {
	spec    *spec
	impl    asker
	slots   chan struct{}
	metrics *metrics
}

// consult asks the provider and answers with a Response whatever happens.
func (p *provider) consult(ctx context.Context, q query) Response {
	start := time.Now()
	o := p.run(ctx, q, start)
	d := time.Since(start)
	r := Response{Tool: p.spec.name, Status: o.status, Output: o.output, Error: strPtr(o.err), Duration: seconds(d),
		Timestamp: stamp(start), Model: strPtr(q.model), ExitCode: o.exitCode, Metadata: o.meta}
	if o.model != "" {
		r.Model = &o.model
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	r.Metadata["kind"] = p.spec.kind
	p.metrics.observe(p.spec.name, o.status, d)
	return r
}

func (p *provider) run(ctx context.Context, q query, start time.Time) outcome {
	if q.timeout <= 0 {
		return outcome{status: StatusTimeout, err: "no time was left for this provider before the call's deadline"}
	}
	wait := time.NewTimer(q.timeout)
	defer wait.Stop()
	select {
	case p.slots <- struct{}{}:
	case <-wait.C:
		return outcome{status: StatusTimeout, err: fmt.Sprintf("no free slot within %v: %d consultations of %s were "+
			"running already (its max_in_flight)", q.timeout, cap(p.slots), p.spec.name)}
	case <-ctx.Done():
		return ended(ctx)
	}
	defer func() { <-p.slots }()
	if q.timeout -= time.Since(start); q.timeout <= 0 {
		return outcome{status: StatusTimeout, err: "no time was left after waiting for a free slot"}
	}
	return p.impl.ask(ctx, q)
}

// ended is the outcome of a call whose context ended first.
func ended(ctx context.Context) outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outcome{status: StatusTimeout, err: "the call's deadline passed before the provider answered"}
	}
	return outcome{status: StatusError, err: "the call was cancelled before the provider answered"}
}
