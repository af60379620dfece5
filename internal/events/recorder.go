package events

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"toold/internal/dispatch"
	"toold/internal/registry"
	"toold/internal/state"
)

// Options configure a Recorder.
type Options struct {
	Store *state.Store
	// Audit turns the audit log on (toold's default).
	Audit bool
	// RedactArguments, when set, passes arguments through it before they
	// are hashed for the audit log (state.audit.redact_arguments).
	RedactArguments func(tool string, args []byte) []byte
	// FlushInterval is the longest an event waits in the buffer (50ms).
	FlushInterval time.Duration
	// MaxPending bounds the buffer while the store cannot take it
	// (100,000 entries); beyond it events, then audit records, are
	// dropped and counted.
	MaxPending int
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// Recorder is the dispatch observer that feeds the activity stream and the
// audit log. Its hooks copy a few fields into a buffer under a mutex and
// return; Run publishes the buffer.
type Recorder struct {
	opts    Options
	st      *state.Store
	replica string
	log     *zap.Logger
	m       *recorderMetrics
	chain   *chain

	mu      sync.Mutex
	pending []item
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// item is one buffered entry: an event for a subject, or a call's end (an
// activity event and an audit record), or an administrative action.
type item struct {
	subject  string // an execution's subject, or ""
	activity bool   // also an activity event
	ev       Event
	audit    bool
	args     json.RawMessage
	action   string
	target   string
}

var _ dispatch.CallObserver = (*Recorder)(nil)

// NewRecorder builds a recorder; call Run to publish and Close to stop.
func NewRecorder(o Options) *Recorder {
	o.FlushInterval = cmp.Or(o.FlushInterval, 50*time.Millisecond)
	o.MaxPending = cmp.Or(o.MaxPending, 100_000)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Recorder{opts: o, st: o.Store, replica: o.Store.Name(), log: o.Logger, m: newRecorderMetrics(o.Registerer),
		chain: &chain{st: o.Store}, wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
}

// Observe and Stuck make the Recorder a dispatch.Observer; it learns
// everything it needs through CallStarted and CallEnded.
func (r *Recorder) Observe(*registry.Entry, *dispatch.Envelope) {}

// Stuck is not recorded as an event.
func (r *Recorder) Stuck(*registry.Entry, int) {}

// CallStarted records a start event.
func (r *Recorder) CallStarted(c *dispatch.CallInfo) {
	subject := ""
	if c.ExecutionID != "" {
		subject = ExecutionSubject(c.ExecutionID)
	}
	r.add(item{subject: subject, activity: true, ev: Event{Type: TypeStart, Time: time.Now().UTC(), RequestID: c.RequestID, Tool: c.Tool, Caller: c.Caller,
		ExecutionID: c.ExecutionID}})
}

// CallEnded records an end or error event and, with the audit log on, the
// call's audit record.
func (r *Recorder) CallEnded(c *dispatch.CallInfo, env *dispatch.Envelope) {
	ev := Event{Type: TypeEnd, Time: time.Now().UTC(), RequestID: c.RequestID, Tool: c.Tool, Caller: c.Caller,
		ExecutionID: c.ExecutionID, Status: string(env.Status), DurationMS: env.DurationMS}
	if env.Error != nil {
		ev.Type, ev.ErrorType, ev.ErrorCode = TypeError, string(env.Error.Type), env.Error.Code
	}
	r.add(item{activity: true, ev: ev, audit: r.opts.Audit, args: c.Args, action: "execute"})
}

// Execution records an event of one async execution on its own subject;
// its output and its acceptance are activity events too (its start and end
// reach the activity stream through the dispatcher).
func (r *Recorder) Execution(ev Event) {
	ev.Time = time.Now().UTC()
	r.add(item{subject: ExecutionSubject(ev.ExecutionID), activity: ev.Type == TypeOutput || ev.Type == TypePending, ev: ev})
}

// ExecutionNow publishes an execution's event at once, not batched: an
// execution's acceptance must come before anything its runner (perhaps
// another replica, whose batches are its own) says about it.
func (r *Recorder) ExecutionNow(ctx context.Context, ev Event) error {
	ev.Time, ev.Replica = time.Now().UTC(), r.replica
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := r.st.Publish(ctx, "events_publish", ExecutionSubject(ev.ExecutionID), line); err != nil {
		return err
	}
	if ev.Type == TypePending || ev.Type == TypeOutput {
		r.add(item{activity: true, ev: ev})
	}
	r.m.published.Inc()
	return nil
}

// Admin records an administrative action in the audit log: who did what
// to which target.
func (r *Recorder) Admin(caller, action, target, requestID string) {
	if !r.opts.Audit {
		return
	}
	r.add(item{audit: true, action: action, target: target,
		ev: Event{Type: "admin", Time: time.Now().UTC(), Caller: caller, RequestID: requestID}})
}

func (r *Recorder) add(it item) {
	r.mu.Lock()
	r.pending = append(r.pending, it)
	n := len(r.pending)
	r.mu.Unlock()
	if n == maxBatch {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// maxBatch is how many entries one flush takes at most; a flush publishes
// at most one message per subject.
const maxBatch = 1024

// Run publishes the buffer every FlushInterval (or when it fills) until
// Close; it returns when the last flush is done.
func (r *Recorder) Run() {
	defer close(r.stopped)
	t := time.NewTicker(r.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-r.wake:
		case <-r.done:
			r.flushAll(5 * time.Second)
			return
		}
		r.flush()
	}
}

// Close flushes what is buffered (for up to 5s) and stops Run.
func (r *Recorder) Close() {
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	<-r.stopped
}

func (r *Recorder) flushAll(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && !r.st.Conn().IsClosed() {
		if r.flush() == 0 {
			return
		}
	}
	r.mu.Lock()
	left := len(r.pending)
	r.mu.Unlock()
	if left > 0 {
		r.log.Error("events: the store did not take the last events and audit records before shutdown", zap.Int("lost", left))
	}
}

// flush publishes up to maxBatch entries; what the store refuses goes back
// to the front of the buffer for the next flush. It returns how many
// entries remain buffered.
func (r *Recorder) flush() int {
	r.mu.Lock()
	n := min(len(r.pending), maxBatch)
	batch := make([]item, n)
	copy(batch, r.pending[:n])
	r.pending = r.pending[:copy(r.pending, r.pending[n:])]
	r.mu.Unlock()
	if n == 0 {
		return 0
	}
	failed := r.publish(batch)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(failed) > 0 {
		r.pending = append(failed, r.pending...)
	}
	r.shed()
	r.m.pending.Set(float64(len(r.pending)))
	return len(r.pending)
}

// shed drops the oldest events, then the oldest audit records, beyond
// MaxPending; r.mu is held.
func (r *Recorder) shed() {
	over := len(r.pending) - r.opts.MaxPending
	if over <= 0 {
		return
	}
	kept := r.pending[:0]
	for i, it := range r.pending {
		if over > 0 && !it.audit {
			over--
			r.m.dropped.WithLabelValues("event").Inc()
			continue
		}
		kept = append(kept, r.pending[i])
	}
	if over > 0 {
		r.m.dropped.WithLabelValues("audit").Add(float64(over))
		r.log.Error("audit: the store has been unavailable too long; oldest audit records dropped", zap.Int("dropped", over))
		kept = kept[over:]
	}
	r.pending = kept
}

// publish writes the batch: one activity message, one message per
// execution subject, and the audit records, chained. It returns the items
// whose writes failed, in order.
func (r *Recorder) publish(batch []item) []item {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var activity bytes.Buffer
	bySubject := map[string]*bytes.Buffer{}
	var order []string
	var audits []item
	for i := range batch {
		it := &batch[i]
		it.ev.Replica = r.replica
		if it.activity {
			line, _ := json.Marshal(withoutEnvelope(it.ev))
			activity.Write(line)
			activity.WriteByte('\n')
		}
		if it.subject != "" {
			b := bySubject[it.subject]
			if b == nil {
				b = &bytes.Buffer{}
				bySubject[it.subject] = b
				order = append(order, it.subject)
			}
			line, _ := json.Marshal(it.ev)
			b.Write(line)
			b.WriteByte('\n')
		}
		if it.audit {
			audits = append(audits, *it)
		}
	}
	eventsOK := true
	for _, subj := range order {
		if _, err := r.st.Publish(ctx, "events_publish", subj, bySubject[subj].Bytes()); err != nil {
			eventsOK = false
		}
	}
	if activity.Len() > 0 {
		if _, err := r.st.Publish(ctx, "events_publish", ActivitySubject, activity.Bytes()); err != nil {
			eventsOK = false
		}
	}
	auditOK := true
	if len(audits) > 0 {
		if err := r.chain.append(ctx, r.records(audits)); err != nil {
			r.log.Warn("audit: appending failed; retrying at the next flush", zap.Error(err))
			auditOK = false
		} else {
			r.m.audited.Add(float64(len(audits)))
		}
	}
	if !eventsOK {
		r.log.Warn("events: publishing failed; retrying at the next flush")
	}
	return retries(batch, eventsOK, auditOK, r.m.published)
}

// retries keeps, of each item, the parts whose write failed, and counts
// the events written.
func retries(batch []item, eventsOK, auditOK bool, published prometheus.Counter) []item {
	var failed []item
	for _, it := range batch {
		if it.activity || it.subject != "" {
			if eventsOK {
				published.Inc()
				it.activity, it.subject = false, ""
			}
		}
		if auditOK {
			it.audit = false
		}
		if it.activity || it.subject != "" || it.audit {
			failed = append(failed, it)
		}
	}
	return failed
}

// withoutEnvelope is the activity stream's copy of an event: the final
// envelope is for the execution's own subscribers.
func withoutEnvelope(ev Event) Event {
	ev.Envelope = nil
	return ev
}

// records turns audit items into unchained records.
func (r *Recorder) records(items []item) []Record {
	out := make([]Record, len(items))
	for i, it := range items {
		rec := Record{Time: it.ev.Time, Replica: r.replica, Kind: "call", Caller: it.ev.Caller, Action: it.action,
			Tool: it.ev.Tool, Status: it.ev.Status, ErrorType: it.ev.ErrorType, DurationMS: it.ev.DurationMS,
			RequestID: it.ev.RequestID, ExecutionID: it.ev.ExecutionID, Target: it.target}
		if it.ev.Type == "admin" {
			rec.Kind = "admin"
		} else {
			rec.ArgsSHA256 = r.argsHash(it.ev.Tool, it.args)
		}
		out[i] = rec
	}
	return out
}

type recorderMetrics struct {
	published prometheus.Counter
	audited   prometheus.Counter
	dropped   *prometheus.CounterVec
	pending   prometheus.Gauge
}

func newRecorderMetrics(reg prometheus.Registerer) *recorderMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
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
