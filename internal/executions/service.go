// Package executions is what outlives a request: async executions,
// batches, idempotency keys and the redundancy check of a turn, built on
// the pipeline (dispatch.Execute runs every call, async or not) and the
// state store (every replica sees every execution).
//
// An accepted async execution is a record in the executions bucket and a
// message on the TOOLD_WORK queue. Any replica's workers take messages from
// the queue; while one runs an execution it renews its lease on the message
// every Heartbeat (JetStream's in-progress acknowledgement). A replica that
// dies stops renewing: after 3 heartbeats the queue hands the message to
// another replica, which finds the record still "running" on the lost one
// and either runs it again (when it may: MayRunAgain, each tool read-only or
// idempotent) or ends it "interrupted". The lease is the queue's own
// ack-wait, not a second
// mechanism: no clock comparisons between replicas, and a message cannot be
// lost between two of them.
//
// What an execution's record may become is one table (lifecycle.go): the
// code says what happened — an event such as claimed, paused, resumedWith
// or ended — and apply says what the record becomes, refusing a move the
// table does not have; commit is the record's one writer.
package executions

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
)

// Options configure a Service.
type Options struct {
	// Store is the shared state; nil leaves only synchronous batches.
	Store      *state.Store
	Dispatcher *dispatch.Dispatcher
	// Recorder receives execution events; required with a Store.
	Recorder *events.Recorder
	// Workers run async executions at once on this replica (default 64);
	// each tool's bulkhead still applies inside.
	Workers int
	// InlineSlots bound the async calls whose caller waits for them that
	// this replica runs where it accepted them, at once, besides its
	// workers (default Workers; see inline.go); negative sends every call
	// through the queue.
	InlineSlots int
	// SubmitWindow is how long the answer to a call nobody waits for may
	// wait for its end when its tool is quick here (default 5ms; see
	// inline.go).
	SubmitWindow time.Duration
	// Heartbeat is how often a running execution's lease is renewed
	// (default 5s); a replica silent for 3 heartbeats has lost its work.
	Heartbeat time.Duration
	// MaxAttempts bounds how often an idempotent execution is started
	// (default 3).
	MaxAttempts int
	// BatchMax caps the calls of a batch (default 32).
	BatchMax int
	// MaxWait bounds ?wait= and Prefer: wait= (default 60s).
	MaxWait time.Duration
	// IdempotencyWait is how long a duplicate request waits for the first
	// one's answer before it is refused with 409 (default 10s; 0 keeps the
	// default, a negative value refuses at once).
	IdempotencyWait time.Duration
	// Allows reports whether a caller may use a tool: the key check of a
	// call that runs after its request is gone (the primary and every
	// fallback the pipeline tries). Nil allows every tool.
	Allows func(caller, tool string) bool
	// AllowsToken is that check for a token's subject (the issuer's
	// tools now, and the narrowing its claims had); nil allows none.
	AllowsToken func(who *auth.Identity, tool string) bool
	Logger      *zap.Logger
	Registerer  prometheus.Registerer
	// Tracer, when set, gives each run of an execution a span in the
	// trace of the request that made it; nil is tracing off.
	Tracer trace.Tracer
	// OnApproval, when set, is told of each call that starts waiting for
	// approval, once, by the replica that parked it (a webhook); it must
	// not block.
	OnApproval func(PendingApproval)
}

// Service runs executions; safe for concurrent use.
type Service struct {
	opts Options
	st   *state.Store
	disp *dispatch.Dispatcher
	rec  *events.Recorder
	log  *zap.Logger
	m    *metrics
	name string

	// lease is this replica's audit lease (recovery.go).
	lease auditLeaseState
	// recovering holds the ends this replica recovers whose audit
	// records are not durable yet: a recovery tried again does not add
	// them twice.
	recovering map[string]bool

	// slots bound the calls this replica runs where it accepted them
	// (InlineSlots), besides what its workers take from the queue.
	slots chan struct{}

	recent recentEnds // final records written here a moment ago

	// readBudget is how long a read rides out the store (readBudget; a
	// test shortens it).
	readBudget time.Duration
	// yieldFor, when set, is how long after its acceptance a run refused
	// for a reason that passes goes back to the queue, instead of its
	// settleBudget (a test shortens it).
	yieldFor time.Duration

	mu       sync.Mutex
	running  map[string]*run // executions running on this replica, by id
	draining bool
	idle     chan struct{}
	stop     context.CancelFunc
	wg       sync.WaitGroup
	subs     []*nats.Subscription // cancel and done notices
	// orphans are records of submits the caller was told failed, whose
	// removal the store refused too (it was full): hidden from List here,
	// and removed by the sweeper once the store takes writes again.
	orphans map[string]uint64 // key -> the revision written

	wmu     sync.Mutex
	waiters map[string][]chan *Record // clients waiting here for an execution's end
}

// New builds a service; Start runs its workers.
func New(o Options) (*Service, error) {
	if o.Dispatcher == nil {
		return nil, errors.New("executions: a dispatcher is required")
	}
	if o.Store != nil && o.Recorder == nil {
		return nil, errors.New("executions: a recorder is required with a store")
	}
	o.Workers = cmp.Or(o.Workers, 64)
	o.InlineSlots = cmp.Or(o.InlineSlots, o.Workers)
	o.SubmitWindow = cmp.Or(o.SubmitWindow, submitWindow)
	o.Heartbeat = cmp.Or(o.Heartbeat, 5*time.Second)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 3)
	o.BatchMax = cmp.Or(o.BatchMax, 32)
	o.MaxWait = cmp.Or(o.MaxWait, 60*time.Second)
	o.IdempotencyWait = cmp.Or(o.IdempotencyWait, 10*time.Second)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	s := &Service{opts: o, st: o.Store, disp: o.Dispatcher, rec: o.Recorder, log: o.Logger, m: newMetrics(o.Registerer),
		running: map[string]*run{}, idle: make(chan struct{}), slots: make(chan struct{}, max(o.InlineSlots, 0)), waiters: map[string][]chan *Record{}, orphans: map[string]uint64{},
		recovering: map[string]bool{}, readBudget: readBudget}
	if o.Store != nil {
		s.name = o.Store.Name()
	}
	return s, nil
}

// Durable reports whether the service keeps executions (it has a store):
// without one, nothing can run asynchronously or wait.
func (s *Service) Durable() bool { return s != nil && s.st != nil }

// Retention is how long an execution is kept after its last change (0
// without a store).
func (s *Service) Retention() time.Duration {
	if s.st == nil {
		return 0
	}
	return s.st.Retention()
}

// MaxWait is the longest ?wait= the service accepts.
func (s *Service) MaxWait() time.Duration { return s.opts.MaxWait }

// BatchMax is the most calls a batch may hold.
func (s *Service) BatchMax() int { return s.opts.BatchMax }

// Errors the service answers with; the server's status table maps their
// codes.
var (
	errNoStore = tools.Errorf(tools.OverloadError, "the state store is off (state.enabled: false): async executions, idempotency keys and turns need it").
			WithCode(tools.CodeStoreUnavailable).WithSuggestion("call without Prefer: respond-async, Idempotency-Key or Toold-Turn, or ask the operator to turn the store on")
	errDraining = &tools.Error{Kind: tools.OverloadError, Code: tools.CodeDraining, RetryAfter: time.Second,
		Message: "toold is shutting down and accepts no new executions", Suggestion: "retry against another replica, or after toold restarts"}
)

// StoreError turns a store failure into the error a caller is answered
// with: 503 while the store is unreachable, 507 when it is full; the cause
// goes only to the log.
func StoreError(err error) *tools.Error {
	if te, ok := tools.AsError(err); ok {
		return te
	}
	if errors.Is(err, state.ErrFull) {
		e := tools.Errorf(tools.OverloadError, "the state store is full: nothing was accepted").WithCode(tools.CodeStoreFull).
			WithSuggestion("retry later; the operator should raise the store's limits or shorten its retention").Wrap(err)
		e.RetryAfter = 5 * time.Second
		return e
	}
	e := tools.Errorf(tools.OverloadError, "the state store is unavailable: nothing was accepted").WithCode(tools.CodeStoreUnavailable).
		WithSuggestion("retry in a few seconds; GET /readyz says when the store is back").Wrap(err)
	e.RetryAfter = time.Second
	return e
}

// readError answers a read the store could not serve: 503 as StoreError,
// without saying nothing was accepted (what is read was).
func readError(err error) *tools.Error {
	if !unavailable(err) {
		return StoreError(err)
	}
	e := tools.Errorf(tools.OverloadError, "the state store is unavailable now; what it holds is kept").WithCode(tools.CodeStoreUnavailable).
		WithSuggestion("read it again in a few seconds; GET /readyz says when the store is back").Wrap(err)
	e.RetryAfter = time.Second
	return e
}

type metrics struct {
	executions *prometheus.CounterVec
	running    prometheus.Gauge
	batches    prometheus.Counter
	replays    *prometheus.CounterVec
	// auditRecovered counts the audit records this replica wrote for
	// lost replicas' ends (recovery.go).
	auditRecovered prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		executions: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_executions_total",
			Help: "Async executions by the state they entered (pending when accepted; then running and a final state)."},
			[]string{"status"}),
		running: f.NewGauge(prometheus.GaugeOpts{Name: "toold_executions_running",
			Help: "Async executions running on this replica."}),
		batches: f.NewCounter(prometheus.CounterOpts{Name: "toold_batches_total",
			Help: "Batches run on this replica."}),
		replays: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_idempotency_outcomes_total",
			Help: "Requests with an Idempotency-Key or a Toold-Turn, by outcome (first, replayed, redundant, mismatch, in_flight, lost)."},
			[]string{"outcome"}),
		auditRecovered: f.NewCounter(prometheus.CounterOpts{Name: "toold_audit_records_recovered_total",
			Help: "Audit records this replica wrote for ends a lost replica wrote after its last flush (its audit lease fired)."}),
	}
	for _, o := range []string{"first", "replayed", "redundant", "mismatch", "in_flight", "lost"} {
		m.replays.WithLabelValues(o)
	}
	for _, st := range dispatch.ExecutionStatuses {
		if st != dispatch.StatusNotFound {
			m.executions.WithLabelValues(string(st))
		}
	}
	return m
}

// every calls f every interval until ctx ends: the heartbeats, the audit
// lease, the orphans' sweep.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
