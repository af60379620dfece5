package executions

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/events"
)

// An execution's end used to wait for its audit record to be in the store
// before the end was written (audited.go): so an accepted call is in the
// audit log even when its replica dies the moment it answers. That wait
// was the largest part of a quick call's answer (docs/performance.md).
// With the replica's audit lease, a call's final record is written
// without it:
//
//   - every replica keeps a timer in the store, its audit lease, that it
//     sets again every heartbeat, due three heartbeats on, carrying its
//     audit watermark: the time before which every audit record it made
//     is in the store (events.Recorder.AuditedUntil);
//   - a final record written without the wait says so (AuditAfter) and
//     keeps the arguments' hash;
//   - a replica that stops setting its lease (killed, or paused past it)
//     has its timer fire on another replica, which reads the final
//     records so marked that the lost replica wrote since its watermark,
//     and the audit log since then, and writes an audit record for each
//     end the log lacks, from the final record, marked recovered_from the
//     lost replica.
//
// So such an end is in the audit log once its replica's flush (50ms) or
// its lease's recovery (three heartbeats) is. A lease that fired while
// its replica lived on (the store away from it, or the replica paused)
// recovers nothing on that replica, or once the replica has set it again:
// it flushes its own records. One recovered before the replica came back
// is in the log twice, the second time marked recovered. A replica that
// has not set its lease within two heartbeats (the store refused) waits
// for the audit record again, as before.
//
// Steps that end waiting still audit before their record (a waiting
// record is not a final one), as do an async batch (its calls are
// audited under its request id: a recovery could not tell lost records
// from present ones) and an execution concluded for a lost replica (its
// record names the replica that ran it, not the one that concluded it).

// auditLease is an audit lease timer's data: whose it is, and its
// watermark when it was set.
type auditLease struct {
	ID      string    `json:"id"` // its timer's
	Replica string    `json:"replica"`
	Until   time.Time `json:"audited_until"`
	Set     time.Time `json:"set"`
	Due     time.Time `json:"due"` // when it fires, unless set again
}

// recoverySlack is how far before a lost replica's watermark its final
// records are read (by its own clock, which wrote both): an end made just
// before a flush took its buffer may have been added just after.
const recoverySlack = 2 * time.Second

// recoverySkew is how far before that the streams are read, by the
// store's clock, which may differ from the replica's.
const recoverySkew = 30 * time.Second

// recoveryBudget bounds one recovery; one that does not finish in it is
// tried again shortly.
const recoveryBudget = 2 * time.Minute

// auditLeaseState is what the service knows of its own audit lease.
type auditLeaseState struct {
	id  string       // its timer's id: one per process, so a restarted replica's predecessor's lease still fires
	set atomic.Int64 // when it was last set (Unix nanoseconds), 0 before
	off bool         // never set (a test of the wait it replaces)
	// stop ends its keeping, at Close: a draining replica still ends
	// the executions it runs, so its lease is kept until then.
	stop context.CancelFunc
}

// auditCovered reports whether an end written now without waiting for
// its audit record would be recovered if this replica stopped: its lease
// was set within two heartbeats, so it fires at least a heartbeat after.
func (s *Service) auditCovered() bool {
	set := s.lease.set.Load()
	return set != 0 && time.Since(time.Unix(0, set)) < 2*s.opts.Heartbeat
}

// auditedEnd starts making the audit records of r's end durable, unless
// the audit lease covers them: the wait auditing returns, or one that
// returns at once, end (the event, not yet written) then marking the
// final record for a recovery. Only a call's end is written before its
// record: a batch's calls are audited under its request id, not its
// execution's, which a recovery could not tell from a lost record.
func (s *Service) auditedEnd(ctx context.Context, r *Record, end *event, budget time.Duration) (wait func()) {
	if r.Kind != "call" || !s.auditCovered() {
		return s.auditing(ctx, r.ID, budget)
	}
	end.auditAfter, end.argsSHA256 = true, s.rec.ArgsHash(r.Tool, r.Arguments)
	return func() {}
}

// setAuditLease sets this replica's audit lease, due three heartbeats
// from now, with the recorder's watermark.
func (s *Service) setAuditLease(ctx context.Context) error {
	now := time.Now().UTC()
	due := now.Add(3 * s.opts.Heartbeat)
	data, _ := json.Marshal(work{Audit: &auditLease{ID: s.lease.id, Replica: s.name, Until: s.rec.AuditedUntil().UTC(), Set: now, Due: due}})
	ctx, cancel := context.WithTimeout(ctx, s.opts.Heartbeat)
	defer cancel()
	if _, err := s.st.Schedule(ctx, s.lease.id, due, data); err != nil {
		return err
	}
	s.lease.set.Store(now.UnixNano())
	return nil
}

// keepAuditLease sets the audit lease every heartbeat until ctx ends
// (Close). It is left to fire when the service stops: a recovery that
// finds every end audited writes nothing.
func (s *Service) keepAuditLease(ctx context.Context) {
	defer s.wg.Done()
	every(ctx, s.opts.Heartbeat, func() {
		if err := s.setAuditLease(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("executions: the replica's audit lease could not be set; ends wait for their audit records until it is",
				zap.Error(err))
		}
	})
}

// startAuditLease sets the lease once and keeps it, with the audit log
// on; a store that refuses now leaves ends waiting for their audit
// records until a heartbeat sets it.
func (s *Service) startAuditLease(ctx context.Context) {
	if !s.rec.Auditing() || s.lease.off {
		return
	}
	s.lease.id = "audit-" + newID(time.Now())
	if err := s.setAuditLease(ctx); err != nil {
		s.log.Warn("executions: the replica's audit lease could not be set; ends wait for their audit records until it is", zap.Error(err))
	}
	lctx, stop := context.WithCancel(context.Background())
	s.lease.stop = stop
	s.wg.Add(1)
	go s.keepAuditLease(lctx)
}

// recoverAudit handles a lost replica's audit lease that fired: it writes
// the audit records the replica's final records lack, and is done with the
// timer; a store that fails brings the timer back shortly.
func (s *Service) recoverAudit(ctx context.Context, msg jetstream.Msg, l *auditLease) {
	// The timer stays this replica's while it works (no other replica
	// recovers the same ends at once), within a bound.
	ctx, cancel := context.WithTimeout(ctx, recoveryBudget)
	defer cancel()
	go every(ctx, s.opts.Heartbeat, func() { _ = msg.InProgress() })
	n, err := s.recoverLease(ctx, l)
	if err != nil {
		s.log.Warn("executions: a lost replica's audit records could not be recovered yet; trying again shortly",
			zap.String("replica", l.Replica), zap.Error(err))
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if n > 0 {
		s.m.auditRecovered.Add(float64(n))
		s.log.Warn("executions: audit records recovered for ends a lost replica wrote after its last flush",
			zap.String("replica", l.Replica), zap.Int("records", n), zap.Time("audited_until", l.Until))
	}
	_ = msg.Ack()
}

// recoverLease writes the audit records the ends of l's replica lack,
// unless the replica is alive — this one, or one that set its lease again
// since l fired (the store was away from it for three heartbeats, or it
// was paused) — and flushes its own records.
func (s *Service) recoverLease(ctx context.Context, l *auditLease) (int, error) {
	if l.ID == s.lease.id || s.leaseSetAgain(ctx, l) {
		return 0, nil
	}
	return s.recoverAuditOf(ctx, l)
}

// leaseSetAgain reports whether l's replica has set its lease again since
// l was set.
func (s *Service) leaseSetAgain(ctx context.Context, l *auditLease) bool {
	data, err := s.st.Scheduled(ctx, l.ID)
	if err != nil {
		return false
	}
	var w work
	return json.Unmarshal(data, &w) == nil && w.Audit != nil && w.Audit.Set.After(l.Set)
}

// recoverAuditOf writes, and makes durable, an audit record for each end
// the replica of l wrote after its watermark that the audit log lacks;
// it returns how many.
func (s *Service) recoverAuditOf(ctx context.Context, l *auditLease) (int, error) {
	from := l.Until.Add(-recoverySlack)
	// By its lease's due time the replica had stopped, unless it was
	// paused (its ends after are its own to audit, as are a restarted
	// one's). Its clock, as UpdatedAt's.
	until := l.Due
	read := from.Add(-recoverySkew)
	ends, asked := map[string]*Record{}, map[string]bool{}
	// Records are encoded by encoding/json, so the lost replica's ends
	// written before their audit records carry these fields as they are:
	// the others are passed over undecoded.
	quoted, _ := json.Marshal(l.Replica)
	field := append([]byte(`"replica":`), quoted...)
	err := s.st.ReadSince(ctx, s.st.Executions.Stream(), read, func(m jetstream.Msg) bool {
		if !bytes.Contains(m.Data(), auditAfterField) || !bytes.Contains(m.Data(), field) {
			return true // another replica's, an end written after its audit record, or a removal
		}
		r, err := decodeRecord(m.Data())
		if err == nil && r.AuditAfter && r.Replica == l.Replica && r.Status.Final() && !r.UpdatedAt.Before(from) && !r.UpdatedAt.After(until) {
			key := events.AuditedEnd(r.ID, string(r.Status))
			ends[key], asked[key] = r, true
		}
		return true
	})
	if err != nil || len(ends) == 0 {
		return 0, err
	}
	audited, err := events.AuditedEnds(ctx, s.st, read, asked)
	if err != nil {
		return 0, err
	}
	var added []string
	s.mu.Lock()
	for key, r := range ends {
		if audited[key] || s.recovering[key] {
			continue // in the log, or in this replica's buffer from a try before
		}
		s.recovering[key] = true
		added = append(added, key)
		s.rec.Recovered(recoveredEvent(r), r.UpdatedAt, r.ArgsSHA256, l.Replica)
	}
	buffered := make([]string, 0, len(s.recovering))
	for key := range s.recovering {
		buffered = append(buffered, key)
	}
	s.mu.Unlock()
	if len(buffered) == 0 {
		return 0, nil
	}
	if err := s.rec.Durable(ctx); err != nil {
		return len(added), err
	}
	s.mu.Lock()
	for _, key := range buffered { // every record added before Durable is in
		delete(s.recovering, key)
	}
	s.mu.Unlock()
	return len(added), nil
}

var auditAfterField = []byte(`"audit_after":true`)

// recoveredEvent is what a final record says of its end, as an audit
// record's event.
func recoveredEvent(r *Record) events.Event {
	env := r.View()
	ev := events.Event{Type: events.TypeEnd, RequestID: r.RequestID, Tool: r.Tool, Caller: r.Caller, Principal: r.Principal,
		ExecutionID: r.ID, Status: string(r.Status), DurationMS: env.DurationMS}
	if env.Error != nil {
		ev.Type, ev.ErrorType, ev.ErrorCode = events.TypeError, string(env.Error.Type), string(env.Error.Code)
	}
	return ev
}
