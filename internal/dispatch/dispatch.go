// Package dispatch is THE execution pipeline. Every transport (REST,
// streaming, batch, async, MCP) calls Dispatcher.Execute; nothing runs a tool
// around it. The steps, in order: resolve the tool and check the caller may
// use it; decode the arguments strictly; validate them against the compiled
// schema; sanitize them; enter the tool's bulkhead; execute under the
// deadline; validate the result against the output schema; sanitize it;
// record. A call that fails in a way another tool may get past runs the
// tool's fallbacks, each through the same steps. Every outcome is one
// Envelope.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/confirm"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// Request is one call as a transport received it.
type Request struct {
	Tool string
	// Body is the raw arguments JSON, or {"arguments": {...}} when the
	// transport allows that wrapper (see Unwrap). Empty means {}.
	Body []byte
	// Unwrap accepts a body of the form {"arguments": {...}}.
	Unwrap    bool
	RequestID string
	// Caller names the caller for the tool and the logs: the principal's
	// name (auth.Identity.Name).
	Caller string
	// Principal is who the call is for, when it is more than a name (a
	// key's holder, a token's subject, issuer and acting client): the
	// envelope, the call observers (events, audit) and the span show it.
	// Nil for the anonymous caller.
	Principal *auth.Identity
	// Allowed reports whether the caller may use a tool; nil allows all.
	Allowed func(tool string) bool
	// Timeout, when positive, shortens (never lengthens) the tool's timeout.
	Timeout time.Duration
	// ConfirmToken answers a confirmation challenge for a tool that
	// requires one.
	ConfirmToken string
	// OnStart, when set, is called once the call is admitted and the tool
	// is about to run (streaming transports open their stream there, so a
	// refusal can still be answered with a plain status).
	OnStart func()
	// Emit, when set, receives streamed output (already sanitized).
	Emit func(tools.Chunk)
	// ExecutionID names the async execution this call runs, if any; it
	// reaches the envelope and the call observers.
	ExecutionID string
	// Resume resumes a paused call: the tool runs again with it.
	Resume *tools.Resumption
	// Confirmed says the call passed the confirmation gate already: a
	// person approved it, or an earlier step of the execution it resumes
	// passed (a token is spent once, on the first step).
	Confirmed bool
	// Lineage lets a tool look up a parent execution (see tools.Call).
	Lineage func(ctx context.Context, executionID string) (*tools.Lineage, error)
	// Via is the way the call came in (policy.ViaREST, ViaMCP, ViaBatch,
	// ViaExecution, ViaConsole): what policies see as context.via.
	Via string
	// Ticket, when set, is the slot Admit took for this call before its
	// body was read: the call runs in it rather than entering the bulkhead
	// again.
	Ticket *Ticket
	// Charged says the call was charged its principal's rate already: a
	// fallback runs as part of the call it stands in for, and an async
	// batch's calls were charged when the batch was accepted (Charge).
	Charged bool
}

// Sanitizer is the sanitization stage.
type Sanitizer interface {
	Input(ctx context.Context, spec *tools.Spec, args any) (any, sanitize.Report, error)
	Output(ctx context.Context, spec *tools.Spec, data json.RawMessage) (json.RawMessage, sanitize.Report, error)
	// OutputBudget is Output cut to budget bytes (or the output cap if
	// smaller); whole is the result sanitized but not cut, when it was.
	OutputBudget(ctx context.Context, spec *tools.Spec, data json.RawMessage, budget int) (head, whole json.RawMessage, rep sanitize.Report, err error)
	Text(spec *tools.Spec, s string) (string, sanitize.Report)
	Stream(spec *tools.Spec, emit func(tools.Chunk)) (wrapped func(tools.Chunk), flush func())
	// RedactJSON redacts a JSON document for the debug log, whatever the
	// tool's output policy says.
	RedactJSON(tool string, data []byte) []byte
	// RedactString is RedactJSON for a text.
	RedactString(tool, text string) string
	// ToolRedactions reports (and counts in the metrics) what a tool
	// masked in its result itself, by kind.
	ToolRedactions(spec *tools.Spec, byKind map[string]int) sanitize.Report
	// Review is the arguments as a person approving the call is shown
	// them, with what they must know of them.
	Review(tool string, args any) (json.RawMessage, []sanitize.ReviewNote)
}

// Limiter is the bulkhead stage: Admit returns once the call may run, with
// the function that frees its slot, or an error (a *tools.Error of kind
// overload_error, or the context's error). Full returns the refusal Admit
// would give now, or nil: a call to a saturated tool is refused before its
// arguments are read, so a stampede costs little.
//
// Stuck accounts a call that keeps running after its context was cancelled;
// when it answers detach, the dispatcher frees the call's slot at once, and
// calls done when the tool finally returns (see watchStuck).
type Limiter interface {
	Admit(ctx context.Context, e *registry.Entry) (release func(), err error)
	// TryAdmit takes a slot only if one is free now, never waiting: ok
	// false (and no error) when the call would queue; err for a refusal
	// Admit would give at once.
	TryAdmit(e *registry.Entry) (release func(), ok bool, err error)
	Full(e *registry.Entry) error
	Stuck(e *registry.Entry) (detach bool, done func())
	// ServiceTime is the mean time the tool's calls run here (zero before
	// the first ended).
	ServiceTime(e *registry.Entry) time.Duration
}

// PrincipalLimiter bounds each principal on its own (limits.Principals):
// Charge spends one call of the caller's rate, ChargeN n of them at once
// (or none); Hold takes one of its share of a tool's bulkhead until
// release (nil: nothing held).
type PrincipalLimiter interface {
	Charge(caller string) error
	ChargeN(caller string, n int) error
	Hold(caller string, e *registry.Entry) (release func(), err error)
}

// Observer is told the outcome of every call (metrics, events).
type Observer interface {
	Observe(e *registry.Entry, env *Envelope)
	// Stuck is told +1 when a tool keeps running past its cancelled
	// context by more than StuckAfter, and -1 when it finally returns.
	Stuck(e *registry.Entry, delta int)
}

// CallObserver is an optional capability of an Observer that needs to know
// who made a call and with what (the activity stream, the audit log). It is
// told when a call's tool starts running, and when every call ends, the
// unknown tool's and the refused one's too. Both run on the call's path:
// they must hand the work off and return at once.
type CallObserver interface {
	CallStarted(c *CallInfo)
	CallEnded(c *CallInfo, env *Envelope)
}

// CallInfo describes a call to a CallObserver. Nothing in it may be
// modified or kept past the call except by copying.
type CallInfo struct {
	// Entry is the tool; nil when no tool has the requested name.
	Entry                   *registry.Entry
	Tool, RequestID, Caller string
	// Principal is Request.Principal.
	Principal   *auth.Identity
	ExecutionID string
	// Args are the arguments as the tool received them (after input
	// sanitization), or the body as sent when the call was refused before
	// that.
	Args json.RawMessage
}

// Options configure a Dispatcher.
type Options struct {
	// Registry is the set of tools served; each call resolves its tool in
	// the snapshot current when it starts.
	Registry  *registry.Live
	Sanitizer Sanitizer
	Limiter   Limiter
	// Principals, when set, bounds each principal's rate and share of a
	// tool's bulkhead, before the bulkhead is entered.
	Principals PrincipalLimiter
	Observers  []Observer
	// Confirm issues and checks confirmation tokens; nil makes a gate with
	// a random secret (tokens valid on this replica only).
	Confirm *confirm.Gate
	Logger  *zap.Logger
	// MaxDepth bounds argument nesting (default strictjson.DefaultMaxDepth).
	MaxDepth int
	// StuckAfter is how long a tool may outlive its cancelled context
	// before it counts as stuck (default 1s).
	StuckAfter time.Duration
	// Tracer, when set, gives every call a span (see trace.go); nil is
	// tracing off, at no cost.
	Tracer trace.Tracer
	// TracePayloads reports whether a tool's spans may carry its
	// (sanitized) arguments and result; nil allows none.
	TracePayloads func(tool string) bool
	// Policy decides every call (and what each caller may list); nil:
	// no policy, every call the caller's credentials allow runs.
	Policy *policy.Engine
	// Toolsets are the configured toolsets, which policies see as a
	// tool's toolsets.
	Toolsets registry.Toolsets
	// MaxResultBytes is the result budget of a tool that declares none
	// (server.max_result_bytes); zero or less: no budget. A reload
	// changes it, with the other Stages (Swap).
	MaxResultBytes int64
	// Artifacts keeps the whole of a result over its budget, for the
	// caller to fetch; nil keeps none (the answer is the head alone).
	Artifacts Artifacts
}

// Dispatcher runs calls through the pipeline; safe for concurrent use.
type Dispatcher struct {
	opts    Options
	stages  atomic.Pointer[stagesRef]
	log     *zap.Logger
	workers *workers
	calls   []CallObserver // the Observers that are CallObservers too
}

// New builds a dispatcher; Registry, Sanitizer and Limiter are required.
func New(opts Options) (*Dispatcher, error) {
	if opts.Registry == nil || opts.Sanitizer == nil || opts.Limiter == nil {
		return nil, errors.New("dispatch: registry, sanitizer and limiter are required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = strictjson.DefaultMaxDepth
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = time.Second
	}
	if opts.Confirm == nil {
		opts.Confirm = confirm.New(nil, 0)
	}
	d := &Dispatcher{opts: opts, log: opts.Logger, workers: newWorkers(10 * time.Second)}
	d.stages.Store(newStagesRef(Stages{Sanitizer: opts.Sanitizer, Principals: opts.Principals, Policy: opts.Policy,
		Toolsets: opts.Toolsets, TracePayloads: opts.TracePayloads, MaxResultBytes: opts.MaxResultBytes}))
	for _, o := range opts.Observers {
		if co, ok := o.(CallObserver); ok {
			d.calls = append(d.calls, co)
		}
	}
	return d, nil
}

// Registry returns the tools the dispatcher serves now: an immutable
// snapshot, replaced (not changed) when the set of tools changes.
func (d *Dispatcher) Registry() *registry.Registry { return d.opts.Registry.Load() }

// ServiceTime is the mean time the named tool's calls run on this replica,
// as its bulkhead measures them (zero for a tool unknown, or none of whose
// calls ended yet).
func (d *Dispatcher) ServiceTime(tool string) time.Duration {
	e, ok := d.Registry().Lookup(tool)
	if !ok {
		return 0
	}
	return d.opts.Limiter.ServiceTime(e)
}

// MaxDepth is how deep arguments may nest. A body that carries arguments
// inside a wrapper (a batch, POST /executions) allows its own levels more.
func (d *Dispatcher) MaxDepth() int { return d.opts.MaxDepth }

// call is the state of one execution as it moves through the steps.
type call struct {
	st    *stagesRef // the stages the call started with
	req   *Request
	entry *registry.Entry
	env   *Envelope
	args  json.RawMessage // what the tool receives
	tree  any             // the same, decoded
	info  *CallInfo       // for the call observers, once built
	span  trace.Span      // the call's span; nil with tracing off
}

// logFields are the fields that tie a log line about the call to its
// trace; none with tracing off.
func (c *call) logFields() []zap.Field {
	if c.span == nil {
		return nil
	}
	return tracing.LogFields(trace.ContextWithSpan(context.Background(), c.span))
}

func newCall(req *Request, start time.Time) *call {
	// One allocation for both: the envelope lives as long as the call.
	ce := &struct {
		c   call
		env Envelope
	}{call{req: req}, Envelope{RequestID: req.RequestID, Tool: req.Tool, StartedAt: start.UTC(), ExecutionID: req.ExecutionID,
		Principal: req.Principal}}
	ce.c.env = &ce.env
	return &ce.c
}

// timeout is the call's: its tool's, shortened (never lengthened) by the
// request's. c.entry is resolved.
func (c *call) timeout() time.Duration {
	timeout := c.entry.Spec.Limits.Timeout
	if t := c.req.Timeout; t > 0 && t < timeout {
		timeout = t
	}
	return timeout
}

// toolName is the call's tool as logs, spans, events and audit records
// name it: the tool's name once resolved; before that, or when no tool
// has the name, registry.UnknownName's redacted form, never the name as
// the caller typed it.
func (c *call) toolName() string {
	if c.entry != nil {
		return c.entry.Spec.Name
	}
	return registry.UnknownName(c.req.Tool)
}

// callInfo builds (once) what call observers are told.
func (c *call) callInfo() *CallInfo {
	if c.info == nil {
		args := c.args
		if args == nil {
			args = c.req.Body
		}
		c.info = &CallInfo{Entry: c.entry, Tool: c.toolName(), RequestID: c.req.RequestID, Caller: c.req.Caller,
			Principal: c.req.Principal, ExecutionID: c.req.ExecutionID, Args: args}
	}
	return c.info
}

// Execute runs one call through every step and returns its envelope, never
// nil. ctx carries the caller's cancellation (a disconnected client). When
// the tool fails in a way another tool may get past and names fallbacks,
// they run in turn, each through every step again (see fallback).
func (d *Dispatcher) Execute(ctx context.Context, req *Request) *Envelope {
	start := time.Now()
	if req.OnStart != nil { // a stream opens once, whichever tool answers
		once := *req
		once.OnStart = sync.OnceFunc(req.OnStart)
		req = &once
	}
	env, entry := d.executeOnce(ctx, req)
	// A resumed step belongs to the tool that paused: another tool cannot
	// take its answer up.
	if entry != nil && len(entry.Spec.Fallback) > 0 && req.Resume == nil && fallsBack(env) {
		env = d.fallback(ctx, req, entry, env, start)
	}
	return env
}

// executeOnce is one pass through the pipeline, for one tool.
func (d *Dispatcher) executeOnce(ctx context.Context, req *Request) (*Envelope, *registry.Entry) {
	start := time.Now()
	c := newCall(req, start)
	c.st = d.acquire()
	defer d.release(c.st)
	ctx = d.startCall(ctx, c)
	status, err := d.run(ctx, c)
	var w *wait
	switch {
	case errors.As(err, &w):
		c.env.Status, c.env.Waiting, c.env.Pause = StatusWaiting, w.info, w.pause
	case err != nil:
		d.failure(c, status, err)
	default:
		c.env.Status, c.env.Success = StatusSuccess, true
	}
	d.record(c, start)
	d.endCall(c)
	return c.env, c.entry
}

// record ends a call's envelope and tells everyone who keeps account of
// calls: the metrics observers, the debug log, the call observers (events,
// audit). A refusal by Check is recorded the same way.
func (d *Dispatcher) record(c *call, start time.Time) {
	c.env.DurationMS = millis(time.Since(start))
	if c.entry != nil {
		for _, o := range d.opts.Observers {
			o.Observe(c.entry, c.env)
		}
		d.debugLog(c)
	}
	for _, o := range d.calls {
		o.CallEnded(c.callInfo(), c.env)
	}
}

// Check runs the steps before the bulkhead — resolve, permission, decoding,
// validation, input sanitization, and the confirmation challenge of a call
// that carries no token — and returns the refusal's envelope, or nil when
// the call would be run. Async transports check a call before they accept
// it, so a call that can never run is refused at once rather than queued;
// Execute checks it again when it runs. (A token is verified only then:
// checking it here would spend it.) A refusal is observed like any call.
func (d *Dispatcher) Check(ctx context.Context, req *Request) *Envelope {
	return d.checkCall(ctx, req, true)
}

// Validate is Check without the confirmation challenge: for a call that
// will run as part of something else (a batch), where a token cannot be
// sent, and where the run answers a confirmation for itself.
func (d *Dispatcher) Validate(ctx context.Context, req *Request) *Envelope {
	return d.checkCall(ctx, req, false)
}

func (d *Dispatcher) checkCall(ctx context.Context, req *Request, confirm bool) *Envelope {
	start := time.Now()
	c := newCall(req, start)
	c.st = d.acquire()
	defer d.release(c.st)
	status, err := d.check(ctx, c, confirm)
	if err == nil {
		return nil
	}
	d.failure(c, status, err)
	d.record(c, start)
	return c.env
}

func (d *Dispatcher) check(ctx context.Context, c *call, confirm bool) (Status, error) {
	if status, err := d.identify(c); err != nil {
		return status, err
	}
	if confirm { // an async call is charged its principal's rate as it is accepted
		if err := d.charge(c); err != nil {
			return StatusRejected, err
		}
	}
	err2 := d.prepareAndGate(ctx, c, confirm && c.req.ConfirmToken == "")
	var w *wait
	if errors.As(err2, &w) {
		return "", nil // waiting for an approval is not a refusal
	}
	if err2 != nil {
		return StatusRejected, err2
	}
	return "", nil
}

// identify resolves the tool into c.entry and checks the caller may use it.
func (d *Dispatcher) identify(c *call) (Status, error) {
	entry, err := d.resolve(c.req)
	if te, ok := tools.AsError(err); ok && te.Code == tools.CodeToolDefinitionChanged {
		return StatusRejected, err // a tool held back is there, and refused
	}
	if err != nil {
		return StatusNotFound, err
	}
	c.entry = entry
	if c.req.Allowed != nil && !c.req.Allowed(entry.Spec.Name) {
		return StatusRejected, forbidden(entry.Spec.Name)
	}
	return "", nil
}

func forbidden(tool string) *tools.Error {
	return tools.NewPermissionError("this API key may not use the tool %q", tool).WithCode(tools.CodeForbidden).
		WithSuggestion("use a tool listed by GET /tools for this key, or ask the operator to extend the key's tool patterns")
}

// debugLog records a call's arguments and result at debug level only, and
// only through the redactor: the log must never carry a secret, whatever a
// tool's own output policy allows.
func (d *Dispatcher) debugLog(c *call) {
	ce := d.log.Check(zap.DebugLevel, "call")
	if ce == nil {
		return
	}
	name := c.entry.Spec.Name
	args := c.args
	if args == nil {
		args = c.req.Body
	}
	ce.Write(append(c.logFields(), zap.String("tool", name), zap.String("request_id", c.req.RequestID), zap.String("status", string(c.env.Status)),
		zap.ByteString("arguments", c.st.Sanitizer.RedactJSON(name, args)),
		zap.ByteString("result", c.st.Sanitizer.RedactJSON(name, c.env.Data)))...)
}

func (d *Dispatcher) run(ctx context.Context, c *call) (Status, error) {
	if t := c.req.Ticket.take(c.req.Tool); t != nil {
		return d.runAdmitted(ctx, c, t)
	}
	if status, err := d.identify(c); err != nil {
		return status, err
	}
	entry := c.entry
	if err := d.opts.Limiter.Full(entry); err != nil {
		return StatusRejected, err
	}
	held, err := d.principalHold(c)
	if err != nil {
		return StatusRejected, err
	}
	timeout := c.timeout()
	// A slot free now is taken before preparing, as a ticket's is: the
	// call is prepared in it, on this goroutine, and runs without
	// queueing. Otherwise it is prepared on a worker and then queues.
	release, ok, err := d.opts.Limiter.TryAdmit(entry)
	if err != nil {
		freeHeld(held)
		return StatusRejected, err
	}
	if ok {
		return d.runInSlot(ctx, c, both(release, held), timeout, time.Time{})
	}
	if err := d.preparedOnWorker(ctx, c); err != nil {
		freeHeld(held)
		return StatusRejected, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	queued := time.Now()
	_, qs := d.phase(ctx, c, "queue")
	release, err = d.opts.Limiter.Admit(ctx, entry)
	endPhase(qs, err)
	c.env.Timing.QueuedMS = millis(time.Since(queued))
	if err != nil {
		freeHeld(held)
		return d.admitFailure(ctx, err, timeout)
	}
	return d.execute(ctx, c, both(release, held), timeout)
}

// runInSlot runs a call that holds its slot already (a ticket's, or one
// that found a slot free) through the steps after admission: prepared in
// the slot on the caller's goroutine, then executed by deadline. A zero
// deadline means admitted just now, by this call: its (empty) queue phase
// is traced where the trace has it, and its timeout starts once it is
// prepared. The slot is given back if the call is refused, if preparing
// panics, or if the caller left meanwhile (answered as Admit would).
func (d *Dispatcher) runInSlot(ctx context.Context, c *call, release func(), timeout time.Duration, deadline time.Time) (Status, error) {
	if err := d.preparedIn(ctx, c, release); err != nil {
		return StatusRejected, err
	}
	if err := ctx.Err(); err != nil {
		release()
		return d.admitFailure(ctx, err, timeout)
	}
	if deadline.IsZero() {
		_, qs := d.phase(ctx, c, "queue")
		endPhase(qs, nil)
		deadline = time.Now().Add(timeout)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return d.execute(ctx, c, release, timeout)
}

// preparedIn prepares a call holding the slot release frees, on the
// caller's goroutine (decoding, validation, input sanitization, the
// confirmation gate). The slot is freed when the call is refused, or when
// preparing panics (the panic goes on to the server's recoverer, its stack
// intact).
func (d *Dispatcher) preparedIn(ctx context.Context, c *call, release func()) (err error) {
	held := false
	defer func() {
		if !held {
			release()
		}
	}()
	if err = d.prepareAndGate(ctx, c, true); err == nil {
		held = true
	}
	return err
}

// prepareAndGate prepares c and, with gate, passes it through the
// confirmation gate.
func (d *Dispatcher) prepareAndGate(ctx context.Context, c *call, gate bool) error {
	err := d.prepare(ctx, c)
	if err == nil && gate {
		err = d.confirmed(ctx, c)
	}
	return err
}

// preparedOnWorker is prepared for a call that may queue next: the deep
// work runs on a worker, whose stack is grown already, so the caller's
// goroutine stays shallow and a call parked in a queue costs little
// memory. (Prepared on the caller's own goroutine, 1,000 queued callers
// held about 8 KiB of stack more each, past the queue's memory target;
// the hand-off costs two goroutine switches, so it is paid only here.)
func (d *Dispatcher) preparedOnWorker(ctx context.Context, c *call) error {
	t := newTask(prepareTask, d, ctx, c)
	d.workers.await(t)
	err := t.err
	t.free()
	return err
}

// prepareTask prepares t.c and passes it through the confirmation gate; on
// a worker.
func prepareTask(t *task) { t.err = t.d.prepareAndGate(t.ctx, t.c, true) }

func (d *Dispatcher) resolve(req *Request) (*registry.Entry, error) {
	reg := d.opts.Registry.Load()
	if e, ok := reg.Lookup(req.Tool); ok {
		return e, nil
	}
	if why, held := reg.Held(req.Tool); held {
		return nil, tools.Errorf(tools.SecurityError, "the tool %q is held back: %s", req.Tool, why).WithCode(tools.CodeToolDefinitionChanged).
			WithSuggestion("an admin reviews the change at GET /tools/changes and accepts it with POST /tools/changes/%s", req.Tool)
	}
	err := tools.Errorf(tools.NotFound, "there is no tool named %q", req.Tool)
	if near := nearest(req.Tool, reg, req.Allowed); near != "" {
		return nil, err.WithSuggestion("did you mean %q? GET /tools lists every tool", near)
	}
	return nil, err.WithSuggestion("GET /tools lists every tool")
}

// prepare decodes, validates and sanitizes the arguments into c.args.
func (d *Dispatcher) prepare(ctx context.Context, c *call) error {
	body := c.req.Body
	if len(body) == 0 {
		body = []byte("{}")
	}
	_, vs := d.phase(ctx, c, "validate")
	args, err := strictjson.Decode(body, d.opts.MaxDepth)
	if err != nil {
		endPhase(vs, err)
		return tools.Errorf(tools.ValidationError, "the arguments are not acceptable JSON: %v", err).
			WithCode(tools.CodeInvalidJSON).WithSuggestion("send one JSON object of the tool's parameters, for example %s", c.entry.Example())
	}
	if inner, ok := unwrap(args, c.req.Unwrap && c.entry.AcceptsWrapper()); ok {
		args, body = inner, nil
	}
	if fields := c.entry.ValidateArgs(args); fields != nil {
		e := tools.Errorf(tools.ValidationError, "%d argument problem(s): %s", len(fields), summarize(fields))
		e.Fields = fields
		endPhase(vs, e)
		return e.WithSuggestion("fix the fields listed; error.example shows a valid call")
	}
	endPhase(vs, nil)
	start := time.Now()
	sctx, ss := d.sanitizePhase(ctx, c, "input")
	clean, rep, err := c.st.Sanitizer.Input(sctx, &c.entry.Spec, args)
	endPhase(ss, err)
	c.env.Timing.SanitizeMS = addMillis(c.env.Timing.SanitizeMS, time.Since(start))
	c.env.Sanitized.Add(rep)
	if err != nil {
		return err
	}
	if body == nil || rep.Redactions > 0 || len(rep.Notes) > 0 {
		if body, err = json.Marshal(clean); err != nil {
			return fmt.Errorf("re-encoding sanitized arguments: %w", err)
		}
	}
	c.args, c.tree = body, clean
	return d.decide(c)
}

// unwrap returns the inner object of {"arguments": {...}}.
func unwrap(v any, allowed bool) (any, bool) {
	m, ok := v.(map[string]any)
	if !allowed || !ok || len(m) != 1 {
		return nil, false
	}
	inner, ok := m["arguments"].(map[string]any)
	return inner, ok
}

func summarize(fields []tools.FieldError) string {
	s := ""
	for i, f := range fields {
		if i == 3 {
			return s + fmt.Sprintf("; and %d more", len(fields)-3)
		}
		if i > 0 {
			s += "; "
		}
		s += f.String()
	}
	return s
}

func (d *Dispatcher) admitFailure(ctx context.Context, err error, timeout time.Duration) (Status, error) {
	if te, ok := tools.AsError(err); ok {
		return StatusRejected, te
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return StatusTimeout, timeoutError(timeout, "while waiting for a free slot")
	}
	return cancelled(ctx, StatusRejected)
}

func timeoutError(timeout time.Duration, when string) *tools.Error {
	return tools.Errorf(tools.TimeoutError, "the call did not finish within its %v timeout (%s)", timeout, when).
		WithSuggestion("retry later, narrow the request, or ask for a shorter operation")
}

// cancelled explains a cancelled call. A cause that is a *tools.Error (the
// server's drain gives one) is the answer, with the status the call has
// reached (rejected while queued, error once running); otherwise the caller
// went away.
func cancelled(ctx context.Context, reached Status) (Status, error) {
	if te, ok := tools.AsError(context.Cause(ctx)); ok {
		return reached, te
	}
	return StatusError, tools.Errorf(tools.SystemError, "the call was cancelled by its caller").WithCode(tools.CodeCancelled).Wrap(ctx.Err())
}

// failure fills the envelope's error. Anything that is not a *tools.Error is
// a system error: logged in full, answered with a short message.
func (d *Dispatcher) failure(c *call, status Status, err error) {
	te, ok := tools.AsError(err)
	if !ok {
		te = tools.Errorf(tools.SystemError, "the tool failed unexpectedly; the operator can find the cause in the logs under request id %s", c.req.RequestID).Wrap(err)
	}
	if te.Kind == tools.SystemError && te.Code != tools.CodeCancelled {
		d.log.Error("tool system error", append(c.logFields(), zap.String("tool", c.toolName()), zap.String("request_id", c.req.RequestID), zap.Error(err))...)
	}
	c.env.fail(status, te)
	var ch *confirmation
	if errors.As(err, &ch) {
		c.env.Error.ConfirmToken, c.env.Error.ConfirmExpiresAt = ch.token, ch.expires.UTC().Format(time.RFC3339)
	}
	if te.Kind == tools.ValidationError && c.entry != nil {
		c.env.Error.Example = c.entry.Example()
	}
	if c.entry != nil {
		var rep sanitize.Report
		spec := &c.entry.Spec
		c.env.Error.Message, rep = c.st.Sanitizer.Text(spec, c.env.Error.Message)
		c.env.Sanitized.Add(rep)
		c.env.Error.Suggestion, rep = c.st.Sanitizer.Text(spec, c.env.Error.Suggestion)
		c.env.Sanitized.Add(rep)
	}
	d.Redact(c.env)
}
