package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/state"
)

// Options configure a Recorder.
type Options struct {
	Store *state.Store
	// Audit turns the audit log on (toold's default).
	Audit bool
	// Signer signs the audit chain (see Record); nil signs with a key
	// made for this process.
	Signer *Signer
	// RedactArguments, when set, passes arguments through it before they
	// are hashed for the audit log (state.audit.redact_arguments).
	RedactArguments func(tool string, args []byte) []byte
	// FlushInterval is the longest an event waits in the buffer (50ms).
	FlushInterval time.Duration
	// MaxPending bounds the buffer while the store cannot take it
	// (100,000 entries); beyond it the oldest events, then the oldest
	// audit records, are dropped and counted. (A flush under way holds
	// at most one buffer more.)
	MaxPending int
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// Recorder is the dispatch observer that feeds the activity stream and the
// audit log. Its hooks copy a few fields into a buffer under a mutex and
// return; Run publishes the buffer. All the encoding, hashing and chaining
// happens there, once per flush, so what a call pays is an append.
type Recorder struct {
	opts    Options
	st      *state.Store
	replica string
	log     *zap.Logger
	m       *recorderMetrics
	chain   *chain

	mu      sync.Mutex
	pending []item
	spare   []item // the other buffer: flush swaps them
	flushes uint64 // flushes begun
	// auditFrom: no item of pending before it holds an audit record
	// still to write (a Durable flush took them); see flushAudit.
	auditFrom int
	durable   []durableWaiter
	kick      chan struct{} // a Durable call asks for a flush now
	// auditedUntil (Unix nanoseconds): every audit record added before
	// it is in the store; see AuditedUntil.
	auditedUntil atomic.Int64

	done      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	// ctx ends closeTimeout after Close: it bounds the flush under way
	// and the last ones together.
	ctx    context.Context
	cancel context.CancelFunc

	publishTimeout time.Duration // of one message's writes (5s)
	closeTimeout   time.Duration // of Close's flushes, all together (5s)

	// Buffers the flusher (one goroutine) reuses from batch to batch.
	activity []byte
	audits   []Record
	starts   map[*dispatch.CallInfo]int // coalesce's, by call
}

// item is one buffered entry: a call's start, a call's end (an activity
// event and, with the audit log on, its record), an execution's event, or
// an administrative action. Small on purpose: a call appends two.
type item struct {
	typ        string
	at         time.Time
	subject    string // an execution's subject, or ""
	activity   bool   // also an activity event
	audit      bool
	requestID  string
	tool       string
	caller     string
	who        *auth.Identity // a token's principal, beyond caller
	execution  string
	status     string
	errType    string
	errCode    string
	durationMS float64
	args       []byte     // for the audit record's hash
	extra      *itemExtra // what few entries carry
	// call is the pipeline's call a start or end belongs to (the same
	// pointer for both): a flush holding both publishes one end event,
	// its start time in started.
	call    *dispatch.CallInfo
	started time.Time
}

// itemExtra is what only some entries carry: an execution's output and
// final envelope, or an administrative action and its target.
type itemExtra struct {
	stream, chunk  string
	envelope       json.RawMessage
	action, target string
	// A recovered audit record's (Recovered): its arguments' hash, as
	// the final record kept it, and the replica that ran the call.
	argsSHA256, recoveredFrom string
}

var _ dispatch.CallObserver = (*Recorder)(nil)

// NewRecorder builds a recorder; call Run to publish and Close to stop.
func NewRecorder(o Options) *Recorder {
	o.FlushInterval = cmp.Or(o.FlushInterval, 50*time.Millisecond)
	o.MaxPending = cmp.Or(o.MaxPending, 100_000)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{opts: o, st: o.Store, replica: o.Store.Name(), log: o.Logger, m: newRecorderMetrics(o.Registerer),
		chain: newChain(o), done: make(chan struct{}), stopped: make(chan struct{}), kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		publishTimeout: 5 * time.Second, closeTimeout: 5 * time.Second}
	r.auditedUntil.Store(time.Now().UnixNano()) // nothing was added before
	return r
}

// Observe and Stuck make the Recorder a dispatch.Observer; it learns
// everything it needs through CallStarted and CallEnded.
func (r *Recorder) Observe(*registry.Entry, *dispatch.Envelope) {}

// Stuck is not recorded as an event.
func (r *Recorder) Stuck(*registry.Entry, int) {}

// CallStarted records a start event (on the execution's subject too, for
// an async one).
func (r *Recorder) CallStarted(c *dispatch.CallInfo) {
	it := item{typ: TypeStart, at: time.Now(), activity: true, requestID: c.RequestID, tool: c.Tool, caller: c.Caller,
		who: tokenOnly(c.Principal), execution: c.ExecutionID, call: c}
	if c.ExecutionID != "" {
		it.subject = ExecutionSubject(c.ExecutionID)
	}
	r.add(it)
}

// CallEnded records an end or error event and, with the audit log on, the
// call's audit record.
func (r *Recorder) CallEnded(c *dispatch.CallInfo, env *dispatch.Envelope) {
	it := item{typ: TypeEnd, at: time.Now(), activity: true, audit: r.opts.Audit, requestID: c.RequestID, tool: c.Tool,
		caller: c.Caller, who: tokenOnly(c.Principal), execution: c.ExecutionID, status: string(env.Status), durationMS: env.DurationMS,
		args: c.Args, call: c}
	if env.Error != nil {
		it.typ, it.errType, it.errCode = TypeError, string(env.Error.Type), string(env.Error.Code)
	}
	r.add(it)
}

// Execution records an event of one async execution on its own subject;
// its output is an activity event too (its start and end reach the
// activity stream through the dispatcher).
func (r *Recorder) Execution(ev Event) {
	it := item{typ: ev.Type, at: time.Now(), subject: ExecutionSubject(ev.ExecutionID),
		activity:  ev.Type == TypeOutput || ev.Type == TypeWaiting || ev.Type == TypeResumed,
		requestID: ev.RequestID, tool: ev.Tool, caller: ev.Caller, who: tokenOnly(ev.Principal), execution: ev.ExecutionID, status: ev.Status}
	if ev.Stream != "" || ev.Chunk != "" || len(ev.Envelope) > 0 {
		it.extra = &itemExtra{stream: ev.Stream, chunk: ev.Chunk, envelope: ev.Envelope}
	}
	r.add(it)
}

// Quiet drops the events still buffered for an execution's own subject:
// it ended before its id was given out, so nobody follows it, and its
// record tells its events (internal/executions, Record.Quiet). Its
// activity and audit entries stay. One published already (the flush fell
// between its start and end) stays in the stream: an observer who found
// the id in the activity stream that early and followed the execution
// gets its end from the record once it is final, as for events expired.
func (r *Recorder) Quiet(executionID string) {
	r.add(item{typ: typeQuiet, execution: executionID})
}

// typeQuiet is Quiet's mark in the buffer: no event of its own.
const typeQuiet = "quiet"

// quietIn returns the executions batch marks quiet, or nil.
func quietIn(batch []item) map[string]bool {
	var quiet map[string]bool
	for i := range batch {
		if batch[i].typ == typeQuiet {
			if quiet == nil {
				quiet = map[string]bool{}
			}
			quiet[batch[i].execution] = true
		}
	}
	return quiet
}

// Concluded records in the audit log the end of an execution that no call
// of this replica's pipeline ended (so no CallEnded): one found running on
// a lost replica and ended interrupted, or whose wait expired. args are
// its arguments, hashed as a call's are. Its events are the caller's to
// publish (Execution).
func (r *Recorder) Concluded(ev Event, args []byte) {
	r.auditEnd(ev, time.Now(), args, nil)
}

// Recovered records in the audit log the end of an execution that the
// replica named from ran and ended, and that stopped before its record of
// it reached the log: written from the execution's final record
// (internal/executions/recovery.go), at that record's time, with the
// arguments' hash the record kept.
func (r *Recorder) Recovered(ev Event, at time.Time, argsSHA256, from string) {
	r.auditEnd(ev, at, nil, &itemExtra{argsSHA256: argsSHA256, recoveredFrom: from})
}

// auditEnd adds the audit record (only) of an execution's end that no
// call of this replica's pipeline ended: Concluded's and Recovered's.
func (r *Recorder) auditEnd(ev Event, at time.Time, args []byte, extra *itemExtra) {
	if r.opts.Audit {
		r.add(item{typ: ev.Type, at: at, audit: true, requestID: ev.RequestID, tool: ev.Tool, caller: ev.Caller, who: tokenOnly(ev.Principal),
			execution: ev.ExecutionID, status: ev.Status, errType: ev.ErrorType, errCode: ev.ErrorCode, durationMS: ev.DurationMS,
			args: args, extra: extra})
	}
}

// Accepted records an async execution's acceptance in the activity
// stream. (Its own event stream starts from its record: a replica that
// runs it cannot overtake an acceptance that is not an event there.)
func (r *Recorder) Accepted(ev Event) {
	r.add(item{typ: TypePending, at: time.Now(), activity: true, requestID: ev.RequestID, tool: ev.Tool, caller: ev.Caller,
		who: tokenOnly(ev.Principal), execution: ev.ExecutionID, status: ev.Status})
}

// Admin records an administrative action in the audit log: who did what
// to which target.
func (r *Recorder) Admin(caller, action, target, requestID string) {
	r.AdminBy(nil, caller, action, target, requestID)
}

// AdminBy is Admin naming the principal who acted, beyond caller's name
// (a token's subject, issuer and client).
func (r *Recorder) AdminBy(who *auth.Identity, caller, action, target, requestID string) {
	if r.opts.Audit {
		r.add(item{typ: "admin", at: time.Now(), audit: true, caller: caller, who: tokenOnly(who), requestID: requestID,
			extra: &itemExtra{action: action, target: target}})
	}
}

// tokenOnly is the identity records carry beside the caller's name: a
// token's (a key's holder is named by the caller field already).
func tokenOnly(id *auth.Identity) *auth.Identity {
	if id == nil || id.Kind != auth.KindToken {
		return nil
	}
	return id
}

func (r *Recorder) add(it item) {
	r.mu.Lock()
	if len(r.pending) >= r.opts.MaxPending {
		// The store has not taken the buffer for a while. Drop the
		// oldest a sixteenth of the buffer at a time, so that calls do
		// not each pay a pass over it.
		r.shed(r.opts.MaxPending - r.opts.MaxPending/16 - 1)
		r.m.pending.Set(float64(len(r.pending) + 1))
	}
	r.pending = append(r.pending, it)
	r.mu.Unlock()
}

// maxBatch is the most entries one message holds.
const maxBatch = 1024

// Run publishes the buffer every FlushInterval, and at once when Durable
// asks, until Close; it returns when the last flush is done.
func (r *Recorder) Run() {
	defer close(r.stopped)
	t := time.NewTicker(r.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.flush(r.ctx)
		case <-r.kick:
			r.flushAudit(r.ctx)
		case <-r.done:
			r.flushAll(r.ctx)
			return
		}
	}
}

// Close flushes what is buffered (for up to 5s in all, the flush under way
// included) and stops Run.
func (r *Recorder) Close() {
	r.closeOnce.Do(func() {
		close(r.done)
		t := time.AfterFunc(r.closeTimeout, r.cancel)
		<-r.stopped
		t.Stop()
		r.cancel()
	})
}

// flushAll flushes until the buffer is empty or ctx ends.
func (r *Recorder) flushAll(ctx context.Context) {
	for ctx.Err() == nil && !r.st.Conn().IsClosed() {
		if r.flush(ctx) == 0 {
			return
		}
		// The store refused, or calls still end: try again shortly.
		select {
		case <-ctx.Done():
		case <-time.After(r.opts.FlushInterval):
		}
	}
	r.mu.Lock()
	left := len(r.pending)
	r.mu.Unlock()
	if left > 0 {
		r.log.Error("events: the store did not take the last events and audit records before shutdown", zap.Int("lost", left))
	}
}

// flush publishes everything buffered, maxBatch entries to a message;
// what the store refuses goes back to the front of the buffer, in order,
// for the next flush. At the first batch refused because the store is
// down or full it stops, and the batches not tried go back untouched: a
// store that is down costs a flush one timeout, not one per batch. A
// message refused for itself (too large) does not hold the rest back. It
// returns how many entries remain buffered.
func (r *Recorder) flush(ctx context.Context) int {
	r.mu.Lock()
	batch := r.pending
	r.pending, r.auditFrom = r.spare[:0], 0
	r.flushes++
	gen := r.flushes
	took := time.Now()
	r.mu.Unlock()
	var failed, untried []item
	for start := 0; start < len(batch); start += maxBatch {
		end := min(start+maxBatch, len(batch))
		f, down := r.publish(ctx, batch[start:end])
		failed = append(failed, f...)
		if down {
			untried = batch[end:]
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(failed) + len(untried); n > 0 {
		// Back in front of what arrived meanwhile, in batch's array:
		// failed, drawn from the batches tried, ends before untried
		// starts.
		copy(batch, failed)
		copy(batch[len(failed):], untried)
		clear(batch[n:])
		batch = append(batch[:n], r.pending...)
		r.pending, batch = batch, r.pending
	}
	clear(batch) // drop references to arguments and envelopes
	r.spare = batch[:0]
	left := auditLeft(failed) || auditLeft(untried)
	r.audited(took, left)
	r.wakeDurable(gen, left)
	r.shed(r.opts.MaxPending)
	r.m.pending.Set(float64(len(r.pending)))
	return len(r.pending)
}

// AuditedUntil is a time before which every audit record added is in the
// store (or was dropped, counted, because the store stayed away past
// MaxPending): the time the last flush that left no audit record behind
// took its buffer. Flushes run one at a time and put back what the store
// refused before the next takes the buffer, so such a flush wrote every
// record added before it. It lags the clock by a flush interval at
// most while the store takes writes, and stands still while it does not.
// The executions service publishes it as its replica's audit watermark
// (internal/executions/recovery.go).
func (r *Recorder) AuditedUntil() time.Time { return time.Unix(0, r.auditedUntil.Load()) }

// audited moves AuditedUntil to took, the time a flush took its buffer,
// unless the flush left audit records behind.
func (r *Recorder) audited(took time.Time, left bool) {
	if !left {
		r.auditedUntil.Store(took.UnixNano())
	}
}

// Auditing reports whether the audit log is on (not without a recorder).
func (r *Recorder) Auditing() bool { return r != nil && r.opts.Audit }

// shed drops the oldest events, then the oldest audit records, beyond
// limit; r.mu is held.
func (r *Recorder) shed(limit int) {
	over := len(r.pending) - limit
	if over <= 0 {
		return
	}
	kept := r.pending[:0]
	events := 0
	for _, it := range r.pending {
		if events < over && !it.audit {
			events++
			continue
		}
		kept = append(kept, it)
	}
	r.m.dropped.WithLabelValues("event").Add(float64(events))
	if over -= events; over > 0 {
		r.m.dropped.WithLabelValues("audit").Add(float64(over))
		r.log.Error("audit: the store has been unavailable too long; oldest audit records dropped", zap.Int("dropped", over))
		kept = kept[:copy(kept, kept[over:])]
	}
	clear(r.pending[len(kept):]) // drop references to what was shed
	r.pending, r.auditFrom = kept, 0
}

// publish writes one batch: one activity message, one message per
// execution subject, and the audit records, chained. It returns the items
// whose writes failed, with only the parts that failed, and whether a
// write failed because the store is down or full (or the flush is out of
// time), rather than for its own message.
func (r *Recorder) publish(ctx context.Context, batch []item) (failed []item, down bool) {
	ctx, cancel := context.WithTimeout(ctx, r.publishTimeout)
	defer cancel()
	activity := r.activity[:0]
	bySubject := map[string][]byte{}
	var order []string
	audits := r.audits[:0]
	defer func() { r.activity, r.audits = activity[:0], audits[:0] }()
	r.coalesce(batch)
	quiet := quietIn(batch)
	for i := range batch {
		it := &batch[i]
		if it.subject != "" && quiet[it.execution] {
			it.subject = ""
		}
		if it.activity {
			activity = append(r.appendEvent(activity, it, false), '\n')
		}
		if it.subject != "" {
			if _, ok := bySubject[it.subject]; !ok {
				order = append(order, it.subject)
			}
			bySubject[it.subject] = append(r.appendEvent(bySubject[it.subject], it, true), '\n')
		}
		if it.audit {
			audits = append(audits, r.record(it))
		}
	}
	// Each message succeeds or fails on its own: only the events of one
	// that failed are sent again, or their subscribers would see the
	// others twice. They are sent all at once (one timeout covers them:
	// once the store is down, the rest fail at once).
	msgs := make([]*nats.Msg, 0, len(order)+1)
	for _, subj := range order {
		msgs = append(msgs, &nats.Msg{Subject: subj, Data: bySubject[subj]})
	}
	if len(activity) > 0 {
		msgs = append(msgs, &nats.Msg{Subject: ActivitySubject, Data: activity})
	}
	// The audit append goes at the same time as the events: a flush
	// Durable waits for takes one round trip, not two.
	appended := make(chan error, 1)
	if len(audits) > 0 {
		go func() { appended <- r.appendAudit(ctx, audits) }()
	}
	var failedSubjects map[string]bool
	var eventsErr error
	activityOK := true
	for i, err := range r.st.PublishAll(ctx, "events_publish", msgs) {
		if err == nil {
			continue
		}
		if subj := msgs[i].Subject; subj == ActivitySubject {
			activityOK = false
		} else {
			if failedSubjects == nil {
				failedSubjects = map[string]bool{}
			}
			failedSubjects[subj] = true
		}
		eventsErr, down = err, down || storeDown(ctx, err)
	}
	auditOK := true
	if len(audits) > 0 {
		if err := <-appended; err != nil {
			auditOK = false
			down = down || storeDown(ctx, err)
		}
	}
	if eventsErr != nil {
		r.log.Warn("events: publishing failed; retrying at the next flush", zap.Error(eventsErr))
	}
	return retries(batch, failedSubjects, activityOK, auditOK, r.m.published), down
}

// appendAudit appends records to the chain as one block, counts them, or
// says why not; whoever called puts them back for the next flush.
func (r *Recorder) appendAudit(ctx context.Context, records []Record) error {
	if err := r.chain.append(ctx, records); err != nil {
		r.log.Warn("audit: appending failed; retrying at the next flush", zap.Error(err))
		return err
	}
	r.m.audited.Add(float64(len(records)))
	return nil
}

// coalesce gives a call whose start and end are both in batch one
// activity event: its end, carrying the start's time (started) and
// coalesced: true. Half the activity stream's bytes for a call that ends
// quickly. An execution's own events are left whole.
func (r *Recorder) coalesce(batch []item) {
	if r.starts == nil {
		r.starts = map[*dispatch.CallInfo]int{}
	}
	defer clear(r.starts)
	for i := range batch {
		it := &batch[i]
		switch {
		case it.call == nil || !it.activity:
		case it.typ == TypeStart:
			r.starts[it.call] = i
		case it.started.IsZero():
			j, ok := r.starts[it.call]
			if !ok {
				continue
			}
			delete(r.starts, it.call)
			batch[j].activity = false
			it.started = batch[j].at
		}
	}
}

// storeDown reports whether a write failed because the store cannot take
// any now (down, full, or out of time), rather than for its message.
func storeDown(ctx context.Context, err error) bool {
	return errors.Is(err, state.ErrUnavailable) || errors.Is(err, state.ErrFull) || ctx.Err() != nil
}

// retries keeps, of each item, the parts whose write failed (its activity
// event, its execution's event, its audit record: each on its own), and
// counts the events written.
func retries(batch []item, failedSubjects map[string]bool, activityOK, auditOK bool, published prometheus.Counter) []item {
	var failed []item
	written := 0
	for _, it := range batch {
		if it.activity && activityOK {
			written++
			it.activity = false
		}
		if it.subject != "" && !failedSubjects[it.subject] {
			written++
			it.subject = ""
		}
		if auditOK {
			it.audit = false
		}
		if it.activity || it.subject != "" || it.audit {
			failed = append(failed, it)
		}
	}
	published.Add(float64(written))
	return failed
}

// record is an item's audit record, not yet chained.
func (r *Recorder) record(it *item) Record {
	rec := Record{Time: it.at.UTC(), Replica: r.replica, Kind: "call", Caller: it.caller, Principal: it.who, Action: "execute", Tool: it.tool,
		Status: it.status, ErrorType: it.errType, DurationMS: it.durationMS, RequestID: it.requestID, ExecutionID: it.execution}
	switch {
	case it.typ == "admin":
		rec.Kind, rec.Action, rec.Target = "admin", it.extra.action, it.extra.target
	case it.extra != nil && it.extra.recoveredFrom != "":
		rec.ArgsSHA256, rec.RecoveredFrom = it.extra.argsSHA256, it.extra.recoveredFrom
	default:
		rec.ArgsSHA256 = r.ArgsHash(it.tool, it.args)
	}
	return rec
}

type recorderMetrics struct {
	published prometheus.Counter
	audited   prometheus.Counter
	dropped   *prometheus.CounterVec
	pending   prometheus.Gauge
}

func newRecorderMetrics(reg prometheus.Registerer) *recorderMetrics {
	f := promauto.With(reg)
	m := &recorderMetrics{
		published: f.NewCounter(prometheus.CounterOpts{Name: "toold_events_published_total",
			Help: "Activity and execution events written to the state store."}),
		audited: f.NewCounter(prometheus.CounterOpts{Name: "toold_audit_records_total",
			Help: "Audit records appended to the audit log."}),
		dropped: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_events_dropped_total",
			Help: "Events and audit records dropped because the store could not take them in time, by kind (event, audit)."},
			[]string{"kind"}),
		pending: f.NewGauge(prometheus.GaugeOpts{Name: "toold_events_pending",
			Help: "Events and audit records buffered, waiting for the store."}),
	}
	m.dropped.WithLabelValues("event")
	m.dropped.WithLabelValues("audit")
	return m
}
