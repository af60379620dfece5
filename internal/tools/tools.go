// Package tools is toold's tool contract: what a tool is (Tool, Spec), what it
// receives (Call), and how it reports an expected failure (Error). It is small
// on purpose: every built-in tool and every transport depends on it, and of
// toold's packages it depends only on strictjson, a leaf (the JSON Schema
// compiler, compiled.go, reads a schema strictly).
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-playground/validator/v10"
)

// Tool is a value that describes itself and executes a call.
//
// Execute receives arguments that already passed schema validation and the
// input sanitizer. It returns a JSON-marshalable result, or an error: a *Error
// for an expected failure the model can act on, anything else (including a
// panic) becomes a system_error whose detail goes only to the log.
type Tool interface {
	Spec() Spec
	Execute(ctx context.Context, call *Call) (any, error)
}

// Category groups tools by how they run; it selects default limits and
// latency targets (see DefaultLimits).
type Category string

// The categories of the design.
const (
	Direct        Category = "direct"
	ExternalAPI   Category = "external_api"
	MCP           Category = "mcp"
	SystemCommand Category = "system_command"
	Subtask       Category = "subtask"
)

// Categories lists every category, in the order of the design's table.
var Categories = []Category{Direct, ExternalAPI, MCP, SystemCommand, Subtask}

// Valid reports whether c is one of the known categories.
func (c Category) Valid() bool {
	for _, k := range Categories {
		if c == k {
			return true
		}
	}
	return false
}

// Spec is everything toold and a model need to know about a tool.
type Spec struct {
	// Name is unique in a registry and matches NamePattern.
	Name string
	// Description says what the tool does, in one or two sentences.
	Description string
	// Instructions tell the model when and why to use the tool.
	Instructions string
	// Returns describes the result for the model ("expected output").
	Returns  string
	Category Category
	// Parameters is the JSON Schema of the arguments object. Draft 2020-12
	// unless the schema names another draft in "$schema".
	Parameters json.RawMessage
	// Output optionally is the JSON Schema of the result; when present every
	// result is validated against it (invalid_output otherwise).
	Output json.RawMessage
	// OutputDerived marks an Output schema derived from the result's Go
	// type (Typed sets it): it documents the result for models, but is not
	// checked on every call, since the type already guarantees the shape.
	OutputDerived bool
	// Examples are argument sets shown to models; each must validate.
	Examples []Example
	// Confirmation marks a dangerous tool, and says how each call is
	// confirmed before it runs (a token its host repeats, or a person's
	// approval); ConfirmNone, the zero value, runs calls at once. The
	// operator may override it (tools.<name>.confirmation).
	Confirmation Confirmation
	// Limits override the category defaults; zero fields inherit.
	Limits Limits
	// MaxResultBytes is the tool's result budget: a larger result is
	// answered with a head that fits, and kept whole as an artifact of
	// the call. Zero takes the server's (server.max_result_bytes);
	// NoBudget sets none (see ResultBudget).
	MaxResultBytes int64
	// Pauses marks a tool that may pause for a subtask or a person's
	// answer (see Pause): MCP hosts may call it as a task, and follow it
	// while it waits.
	Pauses bool
	// Containment names how the tool is isolated from the host (for tools
	// that start processes); empty for in-process tools. Shown in discovery.
	Containment string
	// Title is a short human-readable name for hosts' user interfaces.
	Title string
	// Effects say what a call may do to the world: MCP hosts see them as
	// annotations, and an execution interrupted with its replica is run
	// again only when they are Rerunnable.
	Effects Effects
	// Source names where a tool comes from when it is not toold's own:
	// the upstream MCP server of a proxied tool. Tools of one source are
	// replaced together when that source's list changes.
	Source string
	// Fallback names tools to run, in order, with the same arguments when
	// this one ends in a failure that may pass (timeout, overload, an
	// unavailable upstream, a system error). Each runs through the whole
	// pipeline; the registry refuses unknown names, cycles and fallbacks
	// whose parameters would refuse this tool's arguments.
	Fallback []string
}

// NoBudget is a MaxResultBytes that sets no budget.
const NoBudget int64 = -1

// DefaultMaxResultBytes is the server's result budget unless configured
// (server.max_result_bytes): 256 KiB, some 64k tokens, what a model's
// context can take from one call beside everything else.
const DefaultMaxResultBytes int64 = 256 << 10

// MinResultBytes is the smallest budget a configuration may set: room
// for a head and the markers saying what was cut.
const MinResultBytes = 1024

// ResultBudgetTag is the validation tag of a max_result_bytes key, which
// ResultBudgetRule checks: 0 (no budget) or at least MinResultBytes.
const ResultBudgetTag = "result_budget"

// ResultBudgetRule is the validator rule of ResultBudgetTag.
func ResultBudgetRule(fl validator.FieldLevel) bool {
	n := fl.Field().Int()
	return n == 0 || n >= MinResultBytes
}

// ResultBudget is the MaxResultBytes of a max_result_bytes as an operator
// writes it: absent (nil) takes the server's, 0 sets none, n is n.
func ResultBudget(p *int64) int64 {
	switch {
	case p == nil:
		return 0
	case *p == 0:
		return NoBudget
	}
	return *p
}

// Effects describe a tool's side effects, as MCP's tool annotations do. The
// zero value claims nothing: not read-only, not idempotent, no outside world.
type Effects struct {
	// ReadOnly: the tool does not change its environment.
	ReadOnly bool
	// Destructive: a change may delete or overwrite (meaningful only when
	// not ReadOnly).
	Destructive bool
	// Idempotent: calling it again with the same arguments has no
	// additional effect, so a lost call may safely be run again.
	Idempotent bool
	// OpenWorld: the tool reaches an open set of outside entities (the
	// web, a third-party API); false for a closed domain such as the
	// workspace.
	OpenWorld bool
}

// Rerunnable reports whether a call whose outcome was lost (its replica
// died while it ran) may run again: a read-only tool changes nothing, and
// an idempotent one nothing more the second time. It is the one rule for
// executions and idempotency keys alike; it follows MCP, where
// idempotentHint means something only when readOnlyHint is false.
func (e Effects) Rerunnable() bool { return e.ReadOnly || e.Idempotent }

// Example is one illustrative call.
type Example struct {
	Description string          `json:"description,omitempty"`
	Arguments   json.RawMessage `json:"arguments"`
}

// NamePattern is what a tool name must match.
var NamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// Limits bound a tool's execution. Zero values mean "inherit".
type Limits struct {
	// Timeout is enforced: the call's context is cancelled when it passes.
	Timeout time.Duration
	// Target and Max are the documented latency objectives; they are
	// exported as metrics and drive alerts, not enforced.
	Target time.Duration
	Max    time.Duration
	// MaxInFlight executions run at once; MaxQueue more may wait
	// (NoQueue for none: zero means inherit).
	MaxInFlight int
	MaxQueue    int
	// QueueWait bounds how long a call may wait for a slot.
	QueueWait time.Duration
	// WaitTimeout bounds how long a paused execution may wait for a
	// subtask, an answer or an approval; it holds no slot meanwhile.
	WaitTimeout time.Duration
}

// NoQueue as MaxQueue means calls never wait: beyond MaxInFlight they are
// refused at once. (Zero cannot say it: zero inherits.)
const NoQueue = -1

// Queue is the number of calls that may wait.
func (l Limits) Queue() int { return max(l.MaxQueue, 0) }

// Merge returns l with every zero field taken from d.
func (l Limits) Merge(d Limits) Limits {
	pick := func(a, b time.Duration) time.Duration {
		if a != 0 {
			return a
		}
		return b
	}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = d.MaxInFlight
	}
	if l.MaxQueue == 0 {
		l.MaxQueue = d.MaxQueue
	}
	l.Timeout = pick(l.Timeout, d.Timeout)
	l.Target = pick(l.Target, d.Target)
	l.Max = pick(l.Max, d.Max)
	l.QueueWait = pick(l.QueueWait, d.QueueWait)
	l.WaitTimeout = pick(l.WaitTimeout, d.WaitTimeout)
	return l
}

// Validate reports limits that cannot work together.
func (l Limits) Validate() error {
	switch {
	case l.Timeout <= 0:
		return fmt.Errorf("timeout must be positive")
	case l.MaxInFlight <= 0:
		return fmt.Errorf("max_in_flight must be positive")
	case l.MaxQueue < 0 && l.MaxQueue != NoQueue:
		return fmt.Errorf("max_queue must not be negative")
	case l.Target > l.Max:
		return fmt.Errorf("target %v is above max %v", l.Target, l.Max)
	case l.Max > l.Timeout:
		return fmt.Errorf("max %v is above timeout %v", l.Max, l.Timeout)
	case l.WaitTimeout < 0:
		return fmt.Errorf("wait_timeout must not be negative")
	}
	return nil
}

// DefaultWaitTimeout bounds a paused call's wait when nothing else does: a
// person or a task system has an hour to answer.
const DefaultWaitTimeout = time.Hour

// DefaultLimits returns the design's documented defaults for a category.
// The queue-wait bound defaults to the timeout: time spent queued counts
// against the deadline anyway.
func DefaultLimits(c Category) Limits {
	l := map[Category]Limits{
		Direct:        {Target: 500 * time.Millisecond, Max: time.Second, Timeout: 5 * time.Second, MaxInFlight: 10, MaxQueue: 100},
		ExternalAPI:   {Target: 2 * time.Second, Max: 3 * time.Second, Timeout: 10 * time.Second, MaxInFlight: 10, MaxQueue: 100},
		MCP:           {Target: time.Second, Max: 3 * time.Second, Timeout: 10 * time.Second, MaxInFlight: 10, MaxQueue: 100},
		SystemCommand: {Target: time.Second, Max: 2 * time.Second, Timeout: 30 * time.Second, MaxInFlight: 10, MaxQueue: 100},
		Subtask:       {Target: 30 * time.Second, Max: 90 * time.Second, Timeout: 120 * time.Second, MaxInFlight: 4, MaxQueue: 20},
	}[c]
	l.QueueWait = l.Timeout
	l.WaitTimeout = DefaultWaitTimeout
	return l
}

// Call is one execution of a tool.
type Call struct {
	// Args holds the validated, sanitized arguments object.
	Args json.RawMessage
	// RequestID identifies the request end to end (logs, envelope).
	RequestID string
	// Caller names who made the call (an API key's name, or "anonymous").
	Caller string
	// Resume is set when a paused call is resumed: the tool's Execute
	// runs again with what the pause waited for (see Pause).
	Resume *Resumption
	// ExecutionID names the execution the call belongs to, when it has
	// one (async, or paused); a subtask's delegate call names it as
	// its parent.
	ExecutionID string
	// Lineage looks up an execution of the same caller a tool names as a
	// parent (delegate's depth and cycle check); nil where there is no
	// state store.
	Lineage func(ctx context.Context, executionID string) (*Lineage, error)
	// Allowed reports whether the caller may use a tool (nil: every
	// tool): the caller's view of the catalog, for a tool that answers
	// about other tools (search_tools), narrowed to a toolset when the
	// call came through one.
	Allowed func(tool string) bool

	emit func(Chunk)
	tree any // Args decoded, when the pipeline has it

	// A tool that calls a remote service counts its attempts and the time
	// it waited between them; the pipeline reads them for the envelope,
	// possibly while the tool still runs (a call past its deadline).
	attempts atomic.Int64
	waited   atomic.Int64

	redMu    sync.Mutex
	redacted map[string]int // by kind, what the tool masked itself
}

// Chunk is a piece of streamed output.
type Chunk struct {
	Stream string `json:"stream"`
	Data   string `json:"chunk"`
}

// NewCall builds a call; emit may be nil when nobody streams.
func NewCall(args json.RawMessage, requestID, caller string, emit func(Chunk)) *Call {
	return &Call{Args: args, RequestID: requestID, Caller: caller, emit: emit}
}

// WithTree attaches the decoded form of Args (the tree the pipeline
// validated), so Decode need not parse the text again. The tool may keep
// or change what it decodes from it: the pipeline no longer uses it.
func (c *Call) WithTree(tree any) *Call {
	c.tree = tree
	return c
}

// Decode stores the arguments into v (a pointer). From the pipeline it reads
// the tree the schema validated, without parsing the text again; otherwise it
// parses Args with encoding/json/v2's reference implementation, refusing
// fields v does not know. Names match exactly, as the schema has them.
func (c *Call) Decode(v any) error {
	if rv := reflect.ValueOf(v); c.tree != nil && rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return assign(rv.Elem(), c.tree, nil)
	}
	if err := jsonv2.Unmarshal(c.Args, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Errorf(ValidationError, "arguments do not fit the tool's parameters: %v", err)
	}
	return nil
}

// Streaming reports whether someone is listening to Emit.
func (c *Call) Streaming() bool { return c.emit != nil }

// Emit sends a chunk of output to a streaming caller; without one it does
// nothing, so tools may call it unconditionally.
func (c *Call) Emit(stream, data string) {
	if c.emit != nil && data != "" {
		c.emit(Chunk{Stream: stream, Data: data})
	}
}

// CountAttempt records one attempt at a remote service: the first request
// and each retry. The envelope's timing shows the count.
func (c *Call) CountAttempt() { c.attempts.Add(1) }

// CountWait records time spent waiting before an attempt (a backoff, a
// Retry-After, a rate limit). The envelope's timing shows the total.
func (c *Call) CountWait(d time.Duration) { c.waited.Add(int64(d)) }

// CountRedactions records n secrets or personal data of a kind that the
// tool masked in its result itself, before the output sanitizer saw it
// (grep masks the lines it searches): the envelope's sanitized report and
// the redaction metrics add them to the sanitizer's own.
func (c *Call) CountRedactions(kind string, n int) {
	if n <= 0 {
		return
	}
	c.redMu.Lock()
	defer c.redMu.Unlock()
	if c.redacted == nil {
		c.redacted = map[string]int{}
	}
	c.redacted[kind] += n
}

// Redactions returns what CountRedactions recorded, by kind (a copy; nil
// for none).
func (c *Call) Redactions() map[string]int {
	c.redMu.Lock()
	defer c.redMu.Unlock()
	return maps.Clone(c.redacted)
}

// Attempts returns the attempts counted so far.
func (c *Call) Attempts() int { return int(c.attempts.Load()) }

// Waited returns the waits counted so far.
func (c *Call) Waited() time.Duration { return time.Duration(c.waited.Load()) }

// Upstream is the state of the remote service a tool calls, as discovery
// shows it.
type Upstream struct {
	// Host is the service's host[:port].
	Host string
	// Breaker is its circuit breaker's state: closed, half_open or open.
	Breaker string
	// RetryAfter, while the breaker is open, is when it lets a probe through.
	RetryAfter time.Duration
}

// UpstreamReporter is an optional capability of a tool that calls a remote
// service: discovery shows the service's state as it is at listing time.
type UpstreamReporter interface {
	Upstream() Upstream
}
