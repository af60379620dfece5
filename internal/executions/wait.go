package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// A call pauses when its tool waits for a subtask or an input, or when the
// pipeline waits for a person's approval. The execution is then a record in
// the store (status waiting) and its timer, a scheduled message due when
// the wait expires (timers.go): it holds no bulkhead slot and no
// goroutine. A resumption (or an approval) advances the record's step and
// queues a work message for it; a timer of an earlier step is dropped when
// it fires.

// waitEntry is a call's entry in the waits bucket: what an approver lists
// without reading every record. Only approvals are indexed — an answer or
// a subtask's result comes from the caller, who knows the id. A call
// waiting for approval is under openKey; once decided, expired or
// cancelled it moves to endedKey, kept until the retention so a late
// decision is told it is too late rather than that there was no such call,
// and GET /approvals lists only what is open.
type waitEntry struct {
	// Ended marks a call that no longer waits for approval (decided,
	// expired, cancelled).
	Ended     bool            `json:"ended,omitempty"`
	Key       string          `json:"key"`
	ID        string          `json:"id"`
	For       string          `json:"for"`
	Tool      string          `json:"tool"`
	Caller    string          `json:"caller"`
	Principal *auth.Identity  `json:"principal,omitempty"`
	Request   json.RawMessage `json:"request"`
	Since     time.Time       `json:"since"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// waitOf is the Wait of a paused envelope, bounded by the tool's
// wait_timeout (a pause may ask for less, never more) and by the store's
// retention.
func (s *Service) waitOf(env *dispatch.Envelope, now time.Time) *Wait {
	timeout := tools.DefaultWaitTimeout
	if e, ok := s.disp.Registry().Lookup(env.Tool); ok && e.Spec.Limits.WaitTimeout > 0 {
		timeout = e.Spec.Limits.WaitTimeout
	}
	w := &Wait{For: env.Waiting.For, Request: env.Waiting.Request, Review: env.Waiting.Review, Since: now}
	if p := env.Pause; p != nil {
		w.State = p.State
		if p.Timeout > 0 && p.Timeout < timeout {
			timeout = p.Timeout
		}
	}
	// A record and its timer live for the store's retention from their
	// last write; a wait must end before they do, or it would end as an
	// execution nobody can find rather than as a timeout.
	if keep := s.st.Retention() * 9 / 10; keep > 0 && timeout > keep {
		timeout = keep
	}
	w.ExpiresAt = now.Add(timeout)
	return w
}

// errNoStoreToWait answers a synchronous call that paused, or waits for
// an approval, where no store can keep the wait. The store being off is
// this toold's mode, not a passing state: the refusal is no_store, a
// user_error the caller (a model) reads and goes on without, never a
// retryable store_unavailable it would retry forever.
func errNoStoreToWait(env *dispatch.Envelope) *tools.Error {
	if env.Waiting != nil && env.Waiting.For == tools.WaitApproval {
		return tools.NewUserError("this call waits for a person's approval, and this toold keeps no waits: its state store is off").
			WithCode(tools.CodeNoStore).
			WithSuggestion("do without this tool here; the operator can turn the state store on (state.enabled; for -stdio, state.dir or state.nats.url), or give the tool confirmation: token")
	}
	return tools.NewUserError("this tool waits for an answer, and this toold keeps no waits: its state store is off").
		WithCode(tools.CodeNoStore).
		WithSuggestion("do without this tool here (ask in your reply instead); the operator can turn the state store on (state.enabled; for -stdio, state.dir or state.nats.url)")
}

// Park keeps a synchronous call that paused (or waits for an approval) as
// a waiting execution, and fills the envelope with where to follow and
// resume it. The envelope the caller gets is answered 202: the call goes
// on without it.
func (s *Service) Park(ctx context.Context, req *dispatch.Request, env *dispatch.Envelope) (*Record, error) {
	if s.st == nil {
		return nil, errNoStoreToWait(env)
	}
	if err := s.accepting(); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	r := &Record{ID: newID(now), Caller: req.Caller, Principal: req.Principal, Kind: "call", Tool: req.Tool, Arguments: req.Body,
		TimeoutMS: req.Timeout.Milliseconds(),
		RequestID: req.RequestID, Status: dispatch.StatusRunning, Step: 1, Attempt: 1, Replica: s.name, CreatedAt: now, StartedAt: env.StartedAt}
	return s.parkRecord(ctx, r, env)
}

// parkRecord keeps r, whose step ran here and paused with env, as a
// waiting execution: listed if it waits for approval, its timer set, its
// record written; nothing of it is left if one of them fails.
func (s *Service) parkRecord(ctx context.Context, r *Record, env *dispatch.Envelope) (*Record, error) {
	now := time.Now().UTC()
	r, err := apply(r, paused(env, s.waitOf(env, now), now))
	if err != nil {
		return nil, err
	}
	audited := s.auditing(ctx, r.ID, acceptBudget) // before the record (audited.go)
	defer audited()
	// Listed before it is accepted: an approval no approver can find
	// would be lost until its wait expires.
	if err := s.indexApproval(ctx, r, acceptBudget); err != nil {
		return nil, StoreError(err)
	}
	if err := s.arm(ctx, r, acceptBudget); err != nil {
		s.dropIndex(ctx, r)
		return nil, StoreError(err)
	}
	audited()
	if err := s.accept(ctx, r); err != nil {
		s.disarm(ctx, r)
		s.dropIndex(ctx, r)
		return nil, err
	}
	s.announceWait(ctx, r, env)
	return r, nil
}

// queue publishes the work message of r's current step, the step to run
// (a waiting step's timer is armed by timers.go). It rides out an election
// within budget: the message's id (the execution and its step) makes a
// retry whose first attempt landed a duplicate the stream drops.
func (s *Service) queue(ctx context.Context, r *Record, body []byte, rev uint64, budget time.Duration) error {
	msg := appendWork(make([]byte, 0, len(body)+96), r.key(), rev, body, r.Step)
	id := r.ID + "." + strconv.Itoa(r.Step)
	err := s.retryStore(ctx, budget, func(ctx context.Context) error {
		_, err := s.st.Publish(ctx, "work_publish", state.WorkSubject, msg, jetstream.WithMsgID(id))
		return err
	})
	if err != nil {
		return StoreError(err)
	}
	return nil
}

// reviewed is the request approvers list as they review it: the review
// when there is one (a record parked by a toold before reviews has none).
func (w *Wait) reviewed() json.RawMessage {
	if len(w.Review) > 0 {
		return w.Review
	}
	return w.Request
}

// Keys of the waits bucket.
func openKey(id string) string  { return "open." + id }
func endedKey(id string) string { return "ended." + id }

// indexApproval lists a call waiting for approval in the waits index,
// where approvers find it, riding out the store's absence within budget.
// Other waits are not indexed (the caller who answers knows the id).
func (s *Service) indexApproval(ctx context.Context, r *Record, budget time.Duration) error {
	if r.Wait.For != tools.WaitApproval {
		return nil
	}
	e, _ := json.Marshal(waitEntry{Key: r.key(), ID: r.ID, For: r.Wait.For, Tool: r.Tool, Caller: r.Caller, Principal: r.Principal,
		Request: r.Wait.reviewed(), Since: r.Wait.Since, ExpiresAt: r.Wait.ExpiresAt})
	return s.retryStore(ctx, budget, func(ctx context.Context) error {
		_, err := s.st.Waits.Put(ctx, openKey(r.ID), e)
		return err
	})
}

// dropIndex removes the entry of a wait that was never accepted (best
// effort: a stale entry names a record that is not there, and deciding
// on it answers that no call waits under its id).
func (s *Service) dropIndex(ctx context.Context, r *Record) {
	if r.Wait != nil && r.Wait.For == tools.WaitApproval {
		_ = s.st.Waits.Delete(context.WithoutCancel(ctx), openKey(r.ID))
	}
}

// announceWait publishes the waiting event, with the envelope the caller
// sees, and tells the webhook of a new approval.
func (s *Service) announceWait(ctx context.Context, r *Record, env *dispatch.Envelope) {
	view := r.View()
	env.ExecutionID, env.Waiting = r.ID, view.Waiting
	if r.Wait.For == tools.WaitApproval && s.opts.OnApproval != nil {
		s.opts.OnApproval(PendingApproval{ID: r.ID, Tool: r.Tool, Caller: r.Caller, Principal: r.Principal, Request: r.Wait.reviewed(),
			Since: r.Wait.Since, ExpiresAt: r.Wait.ExpiresAt})
	}
	s.rec.Execution(events.Event{Type: events.TypeWaiting, ExecutionID: r.ID, RequestID: r.RequestID, Tool: r.Tool,
		Caller: r.Caller, Principal: r.Principal, Status: string(dispatch.StatusWaiting), Envelope: view.AppendJSON(nil)})
	_ = s.st.Conn().Publish(state.DoneSubject, []byte(r.ID)) // wakes those waiting for it: it waits for them now
}

// pause records that the step a worker ran paused: its timer is set, the
// record waits, and the delivery is done with. A call waiting for
// approval is listed first (see Park). The store is retried until the
// wait would have expired.
func (s *Service) pause(ctx context.Context, msg jetstream.Msg, r *Record, rev uint64, env *dispatch.Envelope) {
	now := time.Now().UTC()
	ev := paused(env, s.waitOf(env, now), now)
	next, err := apply(r, ev) // the wait as its index and timer need it
	if errors.Is(err, errCancelAsked) {
		s.settle(ctx, msg, r, rev, dispatch.StatusCancelled, cancelledEnvelope(r, "while it ran"))
		return
	} else if err != nil {
		s.log.Error("executions: a pause the lifecycle refuses; the queue will bring it back", zap.String("execution_id", r.ID), zap.Error(err))
		return
	}
	budget := time.Until(next.Wait.ExpiresAt)
	audited := s.auditing(ctx, r.ID, budget) // before the record (audited.go)
	defer audited()
	if err := s.indexApproval(ctx, next, budget); err != nil {
		s.log.Error("executions: a call waiting for approval could not be listed; the queue will bring it back", zap.String("execution_id", r.ID), zap.Error(err))
		return
	}
	if err := s.arm(ctx, next, budget); err != nil {
		s.dropIndex(ctx, next)
		s.log.Error("executions: a wait's timer could not be set; the queue will bring it back", zap.String("execution_id", r.ID), zap.Error(err))
		return
	}
	audited()
	ev.wait = next.Wait // with its timer
	// A record changed under the run otherwise than ended or asked to
	// cancel: the pause stands, written over the new revision.
	w, err := s.commit(ctx, r, rev, ev, how{budget: budget, overwrite: true})
	switch {
	case err == nil:
		if msg != nil {
			_ = msg.Ack()
		}
		s.m.executions.WithLabelValues(string(dispatch.StatusWaiting)).Inc()
		s.announceWait(ctx, w.rec, env)
	case errors.Is(err, errCancelAsked):
		s.unindex(ctx, next)
		s.settle(ctx, msg, r, rev, dispatch.StatusCancelled, cancelledEnvelope(r, "while it ran"))
	case errors.Is(err, errFinal):
		// Ended meanwhile by another replica (it took this one for lost):
		// that end stands, and the wait is not kept.
		s.unindex(ctx, next)
		if msg != nil {
			_ = msg.Ack()
		}
		s.log.Warn("executions: another replica ended this execution first; its pause is dropped", zap.String("execution_id", r.ID))
	default:
		s.disarm(ctx, next)
		s.log.Error("executions: could not record that an execution waits; the queue will bring it back", zap.String("execution_id", r.ID), zap.Error(err))
	}
}

// waited handles a work delivery for a waiting execution: the timer of a
// wait an older toold began (a message held back until it expired). A
// wait that expired ends the execution; one that has not (one a lost
// replica held) is held back again, and the record learns which message
// its timer is.
func (s *Service) waited(ctx context.Context, msg jetstream.Msg, r *Record, rev uint64) {
	if left := time.Until(r.Wait.ExpiresAt); left > 0 {
		if meta, err := msg.Metadata(); err == nil && r.Wait.Timer != meta.Sequence.Stream {
			// A conflict means the wait ended meanwhile: this message is
			// then stale, and acknowledged when it comes back.
			_, _ = s.commit(ctx, r, rev, timerNoted(meta.Sequence.Stream), how{})
		}
		_ = msg.NakWithDelay(left)
		return
	}
	s.conclude(ctx, msg, r, rev, dispatch.StatusTimeout, expiredEnvelope(r))
	s.unindex(ctx, r)
}

func expiredEnvelope(r *Record) *dispatch.Envelope {
	d := r.Wait.ExpiresAt.Sub(r.Wait.Since).Round(time.Second)
	te := tools.Errorf(tools.TimeoutError, "the execution waited for %s longer than its wait timeout (%v) and was ended", waitNoun(r.Wait.For), d).
		WithCode(tools.CodeWaitExpired).WithSuggestion("call the tool again if it is still needed, and answer within %v", d)
	return dispatch.Failure(r.RequestID, r.Tool, dispatch.StatusTimeout, te)
}

func waitNoun(f string) string {
	switch f {
	case tools.WaitSubtask:
		return "its subtask's result"
	case tools.WaitApproval:
		return "a person's approval"
	}
	return "an answer"
}

// Errors of a resumption or an approval, mapped by the status table.
func errNotWaiting(r *Record) *tools.Error {
	if r.expired() {
		return errWaitExpired(r)
	}
	if r.Status.Final() {
		return tools.Errorf(tools.ValidationError, "the execution %s already ended (%s); nothing waits for an answer", r.ID, r.Status).
			WithCode(tools.CodeExecutionEnded).WithSuggestion("GET %s shows its result", r.Location())
	}
	return tools.Errorf(tools.ValidationError, "the execution %s does not wait for an answer now (it is %s): it was resumed already", r.ID, r.Status).
		WithCode(tools.CodeNotWaiting).WithSuggestion("GET %s shows where it is", r.Location())
}

// expired tells whether the execution ended because its wait expired: a
// final record keeps its last wait, and only an expiry ends a waiting
// execution as a timeout (a resumed step clears the wait).
func (r *Record) expired() bool { return r.Status == dispatch.StatusTimeout && r.Wait != nil }

// errWaitExpired refuses an answer or a decision that came after the wait.
func errWaitExpired(r *Record) *tools.Error {
	return tools.Errorf(tools.ValidationError, "the execution %s stopped waiting for %s at %s: its wait expired", r.ID,
		waitNoun(r.Wait.For), r.Wait.ExpiresAt.Format(time.RFC3339)).WithCode(tools.CodeWaitExpired).
		WithSuggestion("call the tool again if it is still needed")
}

// expireIfDue ends r now if its wait is over (a late answer or decision
// gets there before the timer) and says so; nil while it still waits.
func (s *Service) expireIfDue(ctx context.Context, r *Record, rev uint64) error {
	if !time.Now().After(r.Wait.ExpiresAt) {
		return nil
	}
	s.endExpired(ctx, r, rev)
	return errWaitExpired(r)
}

// Resume gives a waiting execution of the caller the answer it waits for
// (the subtask's result, or the input a person gave), checked against what
// the tool asked for, and queues its next step on any replica. An approval
// is not an answer: it goes to Approve, from an approver.
func (s *Service) Resume(ctx context.Context, caller, id, kind string, answer json.RawMessage) (*Record, error) {
	for attempt := 0; attempt < 5; attempt++ {
		r, rev, err := s.get(ctx, caller, id)
		if err != nil {
			return nil, err
		}
		switch {
		case r.Status != dispatch.StatusWaiting || r.Wait == nil:
			return nil, errNotWaiting(r)
		case r.Wait.For == tools.WaitApproval:
			return nil, tools.Errorf(tools.ValidationError, "the execution %s waits for a person's approval, not for an answer", id).
				WithCode(tools.CodeWaitsForApproval).WithSuggestion("an approver decides with POST /approvals/%s", id)
		}
		if err := s.expireIfDue(ctx, r, rev); err != nil {
			return nil, err
		}
		if err := checkAnswer(r, kind, answer); err != nil {
			return nil, err
		}
		next, err := s.advance(ctx, r, rev, resumedWith(answer, time.Now().UTC()))
		if errors.Is(err, state.ErrConflict) {
			continue // resumed, cancelled or expired meanwhile: look again
		} else if err != nil {
			return nil, err
		}
		return next, nil
	}
	return nil, StoreError(state.ErrUnavailable)
}

// advance writes the next step of a waiting execution — ev, a
// resumption or an approval — and queues it; if the queue refuses, the
// step is withdrawn (the record put back as it was), so nothing is stuck
// pending without a message.
func (s *Service) advance(ctx context.Context, prev *Record, rev uint64, ev event) (*Record, error) {
	// The write rides out a lost answer (a node killed, the connection
	// moving): it is retried, and a retry that conflicts because its first
	// attempt landed finds the record as this step wrote it. Given up,
	// a landed write would leave the next step pending with no message to
	// run it (the chaos harness's NATS node kill found one), so the step's
	// writes are the execution's work, not the request's: they go on if
	// the caller leaves, and ride out an election (4 to 9 s) within the
	// step's settle budget, not a new call's acceptBudget — after a first
	// attempt that may have landed, "nothing was accepted" cannot be told
	// (a stream leader's kill left two answered executions pending).
	ctx = context.WithoutCancel(ctx)
	next, err := apply(prev, ev) // the step, as its guard names it
	if err != nil {
		return nil, err
	}
	budget := s.settleBudget(next)
	// Its guard first (guard.go): should this replica die between the
	// write and the message, the guard publishes the message.
	// It is dropped on the way out, unless the step may be pending with no
	// message yet (keepGuard).
	guard, err := s.armGuard(ctx, next, budget)
	if err != nil {
		return nil, StoreError(err)
	}
	keepGuard := false
	defer func() {
		if !keepGuard {
			s.dropGuard(ctx, next.ID, guard)
		}
	}()
	w, err := s.commit(ctx, prev, rev, ev, how{budget: budget})
	if errors.Is(err, state.ErrConflict) {
		return nil, err
	}
	if err != nil {
		// Given up with the store away, an attempt may land yet, however
		// late (a quorum lost for longer): the guard sees to it.
		keepGuard = unavailable(err)
		return nil, StoreError(err)
	}
	next = w.rec
	// The resumed event is recorded before the step is queued: a worker of
	// this replica could otherwise run the step and record its start and
	// end first, and a follower stops reading at the end. (A step run on
	// another replica records through that replica's recorder; there the
	// order of the two replicas' events is not guaranteed. If the queue
	// refuses, the step is withdrawn and the resumer told: the event then
	// said too much, and the execution's next waiting or timeout event
	// corrects it.)
	s.rec.Execution(events.Event{Type: events.TypeResumed, ExecutionID: next.ID, RequestID: next.RequestID, Tool: next.Tool,
		Caller: next.Caller, Principal: next.Principal, Status: string(dispatch.StatusPending)})
	if err := s.queue(ctx, next, w.body, w.rev, budget); err != nil {
		if _, werr := s.commit(ctx, next, w.rev, withdrawn(prev), how{}); werr != nil {
			s.log.Error("executions: a resumed execution could not be queued nor put back; its guard queues it once the store answers",
				zap.String("execution_id", prev.ID), zap.Error(werr))
			keepGuard = true
		}
		return nil, err
	}
	s.unindex(ctx, prev)
	s.m.executions.WithLabelValues(string(dispatch.StatusPending)).Inc()
	return next, nil
}

// unindex deletes the timer of an execution that no longer waits and, for
// an approval, moves its index entry from open to ended.
func (s *Service) unindex(ctx context.Context, r *Record) {
	s.disarm(ctx, r)
	if r.Wait != nil && r.Wait.Timer != 0 {
		if err := s.st.DropWork(ctx, r.Wait.Timer); err != nil {
			s.log.Warn("executions: a wait's timer could not be deleted; it is acknowledged when it comes back",
				zap.String("execution_id", r.ID), zap.Error(err))
		}
	}
	if r.Wait == nil || r.Wait.For != tools.WaitApproval {
		return
	}
	e, _ := json.Marshal(waitEntry{Ended: true, Key: r.key(), ID: r.ID, For: tools.WaitApproval, Tool: r.Tool, Caller: r.Caller})
	_, err := s.st.Waits.Put(ctx, endedKey(r.ID), e)
	if err == nil {
		if err = s.st.Waits.Delete(ctx, openKey(r.ID)); errors.Is(err, state.ErrNotFound) {
			err = nil
		}
	}
	if err != nil {
		// Approvers may still see it listed; deciding on it reads the
		// record, which says it ended.
		s.log.Warn("executions: an ended approval's index entry could not be moved", zap.String("execution_id", r.ID), zap.Error(err))
	}
}

// endExpired ends an execution whose wait expired, now (a resumption or
// an approval that came too late), rather than when its timer comes back.
func (s *Service) endExpired(ctx context.Context, r *Record, rev uint64) {
	if w, err := s.commit(ctx, r, rev, ended(dispatch.StatusTimeout, expiredEnvelope(r), time.Now().UTC()), how{}); err == nil {
		s.unindex(ctx, r)
		s.ended(w.rec)
	}
}

// checkAnswer holds an answer to what the tool asked: the field that
// carries it (result for a subtask, answer for an input), JSON, and for an
// input its choices or schema.
func checkAnswer(r *Record, kind string, answer json.RawMessage) error {
	field := map[string]string{tools.WaitSubtask: "result", tools.WaitInput: "answer"}
	if kind != r.Wait.For {
		return tools.Errorf(tools.ValidationError, "the execution waits for %s: send it as %q", waitNoun(r.Wait.For), field[r.Wait.For]).
			WithCode(tools.CodeInvalidJSON).WithSuggestion(`send {"%s": ...}`, field[r.Wait.For])
	}
	v, err := strictjson.Decode(answer, 0)
	if err != nil {
		return tools.Errorf(tools.ValidationError, "the %s is not acceptable JSON: %v", field[kind], err).WithCode(tools.CodeInvalidJSON)
	}
	if kind != tools.WaitInput {
		return nil
	}
	var in tools.InputRequest
	if err := json.Unmarshal(r.Wait.Request, &in); err != nil {
		return fmt.Errorf("executions: a stored input request is not readable: %w", err)
	}
	var fields []tools.FieldError
	if len(in.Choices) > 0 {
		if str, ok := v.(string); !ok || !slices.Contains(in.Choices, str) {
			fields = append(fields, tools.FieldError{Pointer: "/answer", Message: "must be one of " + quoteAll(in.Choices)})
		}
	}
	if len(in.Schema) > 0 {
		sch, err := tools.CompileSchema(r.Tool, "answer", in.Schema)
		if err != nil {
			return fmt.Errorf("executions: a stored answer schema does not compile: %w", err)
		}
		for _, f := range sch.Validate(v) {
			f.Pointer = "/answer" + f.Pointer
			fields = append(fields, f)
		}
	}
	if fields != nil {
		e := tools.Errorf(tools.ValidationError, "the answer does not fit what the tool asked for: %s %s", fields[0].Pointer, fields[0].Message)
		e.Fields = fields
		return e.WithCode(tools.CodeInvalidAnswer).WithSuggestion("GET %s shows the question (waiting.request)", r.Location())
	}
	return nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Lineage is an execution's place among subtasks, for a delegate call of
// the same caller naming it as its parent.
func (s *Service) Lineage(ctx context.Context, caller, id string) (*tools.Lineage, error) {
	r, err := s.Get(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	if r.Lineage == nil {
		return nil, tools.NewUserError("the execution %s is not a delegated subtask", id).WithCode(tools.CodeNotASubtask).
			WithSuggestion("name as parent the execution id a delegate call answered with")
	}
	return r.Lineage, nil
}
