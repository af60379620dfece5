package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// outcome is what a worker brings back from one execution: the tool's
// result or error and, for a result, its checked and sanitized encoding.
type outcome struct {
	result   any
	err      error
	status   Status // of err, when err came from finish
	data     json.RawMessage
	whole    json.RawMessage // data before its budget's cut, until kept
	artifact *Artifact       // where the whole is kept
	report   sanitize.Report
	execute  time.Duration
	sanitize time.Duration
}

// execute runs the tool on a worker so the caller is answered at the
// deadline even when the tool ignores its context. The slot is freed when
// the tool really returns, or earlier for a stuck call the limiter lets go
// (watchStuck: at most max_in_flight per tool, so the goroutines running
// stay bounded at twice the limit). The worker
// then checks and sanitizes the result; the outcome reaches the envelope
// only if it arrives in time.
func (d *Dispatcher) execute(ctx context.Context, c *call, release func(), timeout time.Duration) (Status, error) {
	emit := c.req.Emit
	flush := func() {}
	if emit != nil {
		emit, flush = c.st.Sanitizer.Stream(&c.entry.Spec, emit)
	}
	tc := tools.NewCall(c.args, c.req.RequestID, c.req.Caller, emit).WithTree(c.tree)
	tc.Resume, tc.ExecutionID, tc.Lineage = c.req.Resume, c.req.ExecutionID, c.req.Lineage
	tc.Allowed = d.listed(c)
	if c.req.OnStart != nil {
		c.req.OnStart()
	}
	for _, o := range d.calls {
		o.CallStarted(c.callInfo())
	}
	r := &running{d: d, ctx: ctx, c: c, entry: c.entry, tc: tc, release: release, flush: flush, done: make(chan outcome, 1)}
	done := r.done
	start := time.Now()
	r.start = start
	r.tctx, r.span = d.phase(ctx, c, "execute")
	// Who the call is for, for a tool that acts as them (its outbound
	// credential is resolved by the principal, at the last moment).
	r.tctx = auth.WithIdentity(r.tctx, c.req.Principal)
	d.workers.start(r)
	defer func() { // what a remote-calling tool counted, even past the deadline
		c.env.Timing.Attempts, c.env.Timing.WaitMS = tc.Attempts(), millis(tc.Waited())
	}()
	select {
	case o := <-done:
		c.env.Timing.ExecuteMS = millis(o.execute)
		c.env.Timing.SanitizeMS = addMillis(c.env.Timing.SanitizeMS, o.sanitize)
		c.env.Sanitized.Add(o.report)
		if byKind := tc.Redactions(); byKind != nil { // masked by the tool itself (grep)
			c.env.Sanitized.Add(c.st.Sanitizer.ToolRedactions(&c.entry.Spec, byKind))
		}
		if o.err != nil && o.status == "" {
			c.env.Data, c.env.Artifact = o.data, o.artifact // what a failing tool produced, checked and sanitized (finishFailure)
			return d.toolOutcome(ctx, c, o, timeout)
		}
		if o.err != nil {
			return o.status, o.err
		}
		c.env.Data, c.env.Artifact = o.data, o.artifact
		return StatusSuccess, nil
	case <-ctx.Done():
		c.env.Timing.ExecuteMS = millis(time.Since(start))
		go d.watchStuck(c, done, r.free)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return StatusTimeout, timeoutError(timeout, "while running")
		}
		return cancelled(ctx, StatusError)
	}
}

// running is one execution handed to a worker: one allocation (and its
// channel) where closures would take several.
type running struct {
	d         *Dispatcher
	ctx, tctx context.Context // the call's, and the execute phase's
	c         *call
	entry     *registry.Entry
	tc        *tools.Call
	span      trace.Span
	start     time.Time
	release   func()
	once      sync.Once // the worker and watchStuck may both free the slot
	flush     func()
	done      chan outcome
}

// free frees the call's slot, once.
func (r *running) free() { r.once.Do(r.release) }

func (r *running) run() {
	o := r.d.invoke(r.tctx, r.entry, r.tc)
	o.execute = time.Since(r.start)
	endPhase(r.span, o.err)
	r.free()
	r.flush()
	if o.err == nil {
		r.d.finish(r.ctx, r.c, &o)
	} else if te, ok := tools.AsError(o.err); ok && te.Result != nil {
		r.d.finishFailure(r.ctx, r.c, &o, te.Result)
	}
	r.done <- o
}

// invoke calls the tool, turning a panic into a system error.
func (d *Dispatcher) invoke(ctx context.Context, e *registry.Entry, tc *tools.Call) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("tool panicked", append(tracing.LogFields(ctx), zap.String("tool", e.Spec.Name), zap.String("request_id", tc.RequestID),
				zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))...)
			o = outcome{err: fmt.Errorf("panic: %v", p)}
		}
	}()
	r, err := e.Tool.Execute(ctx, tc)
	return outcome{result: r, err: err}
}

// watchStuck follows a call answered at its deadline whose tool has not
// returned. Past StuckAfter it is stuck: counted (metric, log, the
// limiter's count that /readyz shows) and, within the limiter's budget,
// detached: its slot is freed so that a tool that ignores its context
// cannot make the tool refuse every other caller. The goroutine keeps
// running until the tool returns; nothing can stop it from outside.
func (d *Dispatcher) watchStuck(c *call, done <-chan outcome, release func()) {
	e := c.entry
	t := time.NewTimer(d.opts.StuckAfter)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	detach, finished := d.opts.Limiter.Stuck(e)
	if detach {
		release()
	}
	for _, o := range d.opts.Observers {
		o.Stuck(e, +1)
	}
	d.log.Warn("tool ignores its cancelled context", append(c.logFields(), zap.String("tool", e.Spec.Name),
		zap.Bool("slot_freed", detach), zap.Duration("stuck_after", d.opts.StuckAfter))...)
	<-done
	finished()
	for _, o := range d.opts.Observers {
		o.Stuck(e, -1)
	}
	d.log.Info("stuck tool returned", append(c.logFields(), zap.String("tool", e.Spec.Name))...)
}

// toolOutcome classifies an error the tool returned. A tool that got an
// answer it cannot use from a remote service (JSON that is not) says so
// with the code invalid_output, as the output check below does.
func (d *Dispatcher) toolOutcome(ctx context.Context, c *call, o outcome, timeout time.Duration) (Status, error) {
	var p *tools.Pause
	if errors.As(o.err, &p) {
		return d.paused(ctx, c, p)
	}
	if te, ok := tools.AsError(o.err); ok {
		switch {
		case te.Kind == tools.ValidationError:
			return StatusRejected, te
		case te.Code == tools.CodeInvalidOutput:
			return StatusInvalidOutput, te
		}
		return StatusError, te
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return StatusTimeout, timeoutError(timeout, "while running").Wrap(o.err)
	}
	return StatusError, o.err
}

// paused turns a tool's pause into a wait: the request the caller sees is
// output like any other, so it is sanitized; an input's schema must
// compile, so an answer can be checked against it.
func (d *Dispatcher) paused(ctx context.Context, c *call, p *tools.Pause) (Status, error) {
	e := c.entry
	bad := func(err error) (Status, error) {
		return StatusError, tools.Errorf(tools.SystemError, "the tool paused wrongly").Wrap(err)
	}
	if err := p.Check(); err != nil {
		return bad(err)
	}
	var public any = p.Subtask
	if p.Input != nil {
		public = p.Input
		if p.Input.Schema != nil {
			if _, err := tools.CompileSchema(e.Spec.Name, "answer", p.Input.Schema); err != nil {
				return bad(err)
			}
		}
	}
	raw, err := json.Marshal(public)
	if err != nil {
		return bad(err)
	}
	clean, _, err := c.st.Sanitizer.Output(ctx, &e.Spec, raw)
	if err != nil {
		return bad(err)
	}
	return StatusWaiting, &wait{info: &Waiting{For: p.For(), Request: clean}, pause: p}
}

// finish encodes the result, checks it against a declared output schema
// and sanitizes it, into o. It runs on the worker and touches no shared
// state: the caller may have been answered already.
func (d *Dispatcher) finish(ctx context.Context, c *call, o *outcome) {
	e := c.entry
	data, err := encodeResult(o.result)
	if err != nil {
		o.status, o.err = StatusError, fmt.Errorf("encoding the result: %w", err)
		return
	}
	if e.ChecksOutput() {
		v, err := strictjson.Decode(data, 0)
		var fields []tools.FieldError
		if err == nil {
			fields = e.ValidateOutput(v)
		}
		if err != nil || fields != nil {
			te := tools.Errorf(tools.SystemError, "the tool's result does not fit its output schema").WithCode(tools.CodeInvalidOutput)
			te.Fields = fields
			o.status, o.err = StatusInvalidOutput, te.Wrap(err)
			return
		}
	}
	if err := d.sanitizeResult(ctx, c, o, data); err != nil {
		o.status, o.err = StatusError, err
		return
	}
	d.keep(ctx, c, o)
}

// finishFailure encodes and sanitizes what a tool returned with its
// failure into o.data, which the failed envelope carries; the failure
// stays the answer. A result that cannot be encoded or sanitized is
// dropped rather than shown unsanitized. No output schema applies: it
// describes the tool's answers, and a failure is not one.
func (d *Dispatcher) finishFailure(ctx context.Context, c *call, o *outcome, result any) {
	data, err := encodeResult(result)
	if err == nil {
		err = d.sanitizeResult(ctx, c, o, data)
	}
	if err == nil {
		d.keep(ctx, c, o)
		return
	}
	o.data, o.whole = nil, nil
	d.log.Warn("a failed call's result was dropped", append(c.logFields(), zap.String("tool", c.entry.Spec.Name), zap.Error(err))...)
}

// sanitizeResult runs the output sanitizer on an encoded result, into
// o.data (cut to the call's budget), o.whole (the result before the cut,
// when there was one), o.report and o.sanitize.
func (d *Dispatcher) sanitizeResult(ctx context.Context, c *call, o *outcome, data []byte) error {
	start := time.Now()
	sctx, ss := d.sanitizePhase(ctx, c, "output")
	var err error
	o.data, o.whole, o.report, err = c.st.Sanitizer.OutputBudget(sctx, &c.entry.Spec, data, c.budget())
	endPhase(ss, err)
	o.sanitize = time.Since(start)
	return err
}

// encodeResult is the result's JSON. A tool that already holds its result
// as JSON (an HTTP API's answer) returns json.RawMessage; it is used as it
// is rather than compacted into a copy: the output sanitizer walks it next
// and returns anything that is not valid JSON as one string.
func encodeResult(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok && len(raw) > 0 {
		return raw, nil
	}
	return json.Marshal(v)
}
