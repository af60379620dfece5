package executions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
)

// An execution's record changes in one place. The rest of the package
// says what happened to the execution — an event — and apply, a pure
// function, says what the record becomes, refusing a move the table does
// not have; commit writes that with the record's one compare-and-set.
//
//	event        may happen when the execution is                    and leaves it
//	accept       (new)                                               pending, running (run where accepted),
//	                                                                 waiting (parked), or ended (ended before its answer)
//	claim        pending; running (a lost replica's, run again)      running here, attempt + 1
//	pause        running, no cancellation asked                      waiting
//	resume       waiting for an answer or a subtask's result         pending, next step
//	approve      waiting for approval                                pending, next step, confirmed
//	withdraw     pending at the step a resume or approve just wrote  waiting as before (its message could not be queued)
//	note timer   waiting                                             waiting (a wait an older toold began: its timer)
//	ask cancel   running, not asked yet                              running, cancellation asked
//	yield        running, refused before it ran for a reason that    pending at its step, the attempt not counted
//	             passes (overload), no cancellation asked            (the queue brings it back)
//	end          pending: cancelled only                             ended: the status, its envelope;
//	             running: any end                                    the arguments, the token, a wait's state dropped
//	             waiting: cancelled, timeout (expired), error (denied)
//
// An ended execution never changes: every event is refused (errFinal).
// Which replica runs a step, and when, is the queue's business (worker.go,
// timers.go, guard.go); what the record says is this table's.

// move is the kind of an event: a row of the table.
type move uint8

const (
	moveAccept move = iota + 1
	moveClaim
	movePause
	moveResume
	moveApprove
	moveWithdraw
	moveNoteTimer
	moveAskCancel
	moveYield
	moveEnd
)

var moveNames = [...]string{moveAccept: "accept", moveClaim: "claim", movePause: "pause", moveResume: "resume", moveApprove: "approve",
	moveWithdraw: "withdraw", moveNoteTimer: "note timer", moveAskCancel: "ask cancel", moveYield: "yield", moveEnd: "end"}

func (m move) String() string {
	if int(m) < len(moveNames) && moveNames[m] != "" {
		return moveNames[m]
	}
	return fmt.Sprintf("move(%d)", m)
}

// event is what happened to an execution, at a time; the fields a move
// does not use are empty.
type event struct {
	move move
	at   time.Time
	// accept: the new record.
	record *Record
	// claim: the replica that runs it now.
	replica string
	// pause: the paused envelope and its wait (waitOf); end: the
	// envelope it ended with.
	env  *dispatch.Envelope
	wait *Wait
	// resume: the answer.
	answer json.RawMessage
	// approve, and end of a denied call: the decision.
	approval *Approval
	// end: its status; quiet marks an end written before the id was out
	// (Record.Quiet); auditAfter and argsSHA256 an end written before its
	// audit record (recovery.go).
	status     dispatch.Status
	quiet      bool
	auditAfter bool
	argsSHA256 string
	// withdraw: the record as it was before the step.
	prev *Record
	// note timer: the work stream sequence of the wait's timer.
	timer uint64
}

// The events, as the rest of the package says them.

func accepted(r *Record) event { return event{move: moveAccept, record: r} }

func claimed(replica string, at time.Time) event {
	return event{move: moveClaim, replica: replica, at: at}
}

func paused(env *dispatch.Envelope, w *Wait, at time.Time) event {
	return event{move: movePause, env: env, wait: w, at: at}
}

func resumedWith(answer json.RawMessage, at time.Time) event {
	return event{move: moveResume, answer: answer, at: at}
}

func approvedBy(a *Approval, at time.Time) event {
	return event{move: moveApprove, approval: a, at: at}
}

func withdrawn(prev *Record) event { return event{move: moveWithdraw, prev: prev} }

func timerNoted(seq uint64) event { return event{move: moveNoteTimer, timer: seq} }

func cancelAsked(at time.Time) event { return event{move: moveAskCancel, at: at} }

func yielded(at time.Time) event { return event{move: moveYield, at: at} }

func ended(status dispatch.Status, env *dispatch.Envelope, at time.Time) event {
	return event{move: moveEnd, status: status, env: env, at: at}
}

// deniedBy ends a call a person refused, keeping the decision.
func deniedBy(a *Approval, env *dispatch.Envelope, at time.Time) event {
	ev := ended(dispatch.StatusError, env, at)
	ev.approval = a
	return ev
}

// errMove is every refusal of apply: a move the table does not have.
var errMove = errors.New("executions: a move the lifecycle does not have")

// errFinal refuses any event of an ended execution: one final state.
var errFinal = fmt.Errorf("%w: the execution has ended, and its record never changes", errMove)

// errCancelAsked refuses to pause or yield a run whose cancellation was
// asked: it ends cancelled instead.
var errCancelAsked = fmt.Errorf("%w: the execution's cancellation was asked, and it does not pause or yield", errMove)

// illegal is a move the table does not have from the record's state.
func illegal(ev event, r *Record, why string) error {
	return fmt.Errorf("%w: no %s of an execution %s at step %d (%s)", errMove, ev.move, r.Status, r.Step, why)
}

// endsFrom are the ends an execution may reach from each state.
var endsFrom = map[dispatch.Status][]dispatch.Status{
	dispatch.StatusPending: {dispatch.StatusCancelled},
	dispatch.StatusRunning: finals,
	dispatch.StatusWaiting: {dispatch.StatusCancelled, dispatch.StatusTimeout, dispatch.StatusError},
}

// finals are the statuses an execution ends with.
var finals = slices.DeleteFunc(slices.Clone(dispatch.ExecutionStatuses), func(s dispatch.Status) bool { return !s.Final() })

// apply is the record r becomes when ev happens to it (r nil: the
// execution is new), or the refusal of a move the table does not have. It
// changes neither r nor ev.
func apply(r *Record, ev event) (*Record, error) {
	switch {
	case r != nil && r.Status.Final():
		return nil, errFinal
	case ev.move == moveAccept:
		return accept(r, ev)
	case r == nil:
		return nil, fmt.Errorf("%w: no %s of an execution that does not exist", errMove, ev.move)
	}
	next := *r
	switch ev.move {
	case moveClaim:
		if r.Status != dispatch.StatusPending && r.Status != dispatch.StatusRunning {
			return nil, illegal(ev, r, "only a pending execution, or one a lost replica ran, is run")
		}
		next.Status, next.Replica, next.Attempt, next.StartedAt, next.UpdatedAt = dispatch.StatusRunning, ev.replica, r.Attempt+1, ev.at, ev.at
	case movePause:
		if err := pause(&next, ev); err != nil {
			return nil, err
		}
	case moveResume, moveApprove:
		if err := advanceStep(&next, ev); err != nil {
			return nil, err
		}
	case moveWithdraw:
		p := ev.prev
		if r.Status != dispatch.StatusPending || p == nil || p.ID != r.ID || p.Status != dispatch.StatusWaiting || r.Step != p.Step+1 {
			return nil, illegal(ev, r, "only the step a resumption or an approval just wrote is withdrawn, back to its wait")
		}
		next = *p
	case moveNoteTimer:
		if r.Status != dispatch.StatusWaiting || r.Wait == nil {
			return nil, illegal(ev, r, "only a wait has a timer")
		}
		w := *r.Wait
		w.Timer, next.Wait = ev.timer, &w
	case moveAskCancel:
		if r.Status != dispatch.StatusRunning || r.CancelRequested {
			return nil, illegal(ev, r, "a cancellation is asked of a running execution, once (any other ends cancelled)")
		}
		next.CancelRequested, next.UpdatedAt = true, ev.at
	case moveYield:
		switch {
		case r.Status != dispatch.StatusRunning:
			return nil, illegal(ev, r, "only a run refused before it ran yields")
		case r.CancelRequested:
			return nil, errCancelAsked
		}
		next.Status, next.Attempt, next.UpdatedAt = dispatch.StatusPending, max(r.Attempt-1, 0), ev.at
	case moveEnd:
		if !slices.Contains(endsFrom[r.Status], ev.status) || ev.env == nil {
			return nil, illegal(ev, r, fmt.Sprintf("it cannot end %s from there", ev.status))
		}
		if r.Status == dispatch.StatusWaiting && ev.status == dispatch.StatusError && ev.approval == nil {
			return nil, illegal(ev, r, "a wait ends in an error only when a person denied the call")
		}
		end(&next, ev)
	default:
		return nil, illegal(ev, r, "no such move")
	}
	return &next, nil
}

// accept checks a new execution's record: it starts pending, running
// where it was accepted, waiting (parked), or ended (an end kept with one
// write), at its first step, never over one that exists.
func accept(r *Record, ev event) (*Record, error) {
	switch n := ev.record; {
	case r != nil:
		return nil, fmt.Errorf("%w: execution %s exists already", errMove, r.ID)
	case n == nil || n.ID == "" || n.Step < 1:
		return nil, fmt.Errorf("%w: an accepted execution needs an id and a step", errMove)
	case n.Status != dispatch.StatusPending && n.Status != dispatch.StatusRunning && n.Status != dispatch.StatusWaiting && !n.Status.Final():
		return nil, fmt.Errorf("%w: an execution is not accepted %q", errMove, n.Status)
	case n.Status == dispatch.StatusWaiting && n.Wait == nil:
		return nil, fmt.Errorf("%w: a waiting execution needs its wait", errMove)
	default:
		c := *n
		return &c, nil
	}
}

// pause makes next, running, wait as the paused envelope says. A tool
// pauses only after the confirmation gate let the call through, so every
// later step runs confirmed (an approval's step is confirmed when it is
// approved).
func pause(next *Record, ev event) error {
	r := *next
	switch {
	case r.Status != dispatch.StatusRunning:
		return illegal(ev, &r, "only a running step pauses")
	case r.CancelRequested:
		return errCancelAsked
	case ev.env == nil || ev.env.Waiting == nil || ev.wait == nil:
		return illegal(ev, &r, "a pause says what it waits for")
	}
	if t := ev.env.Tool; t != "" && t != r.Tool {
		// A fallback that paused: its step is the one to resume, and the
		// call is still the one the caller made.
		next.CalledAs, next.Tool = r.Called(), t
	}
	w := *ev.wait
	next.Status, next.Wait, next.Resume, next.UpdatedAt = dispatch.StatusWaiting, &w, nil, ev.at
	if ev.env.Waiting.For != tools.WaitApproval {
		next.Confirmed, next.ConfirmToken = true, "" // the token was spent on this step
	}
	if p := ev.env.Pause; p != nil && p.Lineage != nil {
		next.Lineage = p.Lineage
	}
	return nil
}

// advanceStep makes next, waiting, its next step, pending: resumed with
// an answer, or approved.
func advanceStep(next *Record, ev event) error {
	r := *next
	if r.Status != dispatch.StatusWaiting || r.Wait == nil {
		return illegal(ev, &r, "only a waiting execution is resumed or approved")
	}
	approval := r.Wait.For == tools.WaitApproval
	if approval != (ev.move == moveApprove) {
		return illegal(ev, &r, "an approval is approved, an answer or a result resumes")
	}
	next.Status, next.Step, next.Wait, next.UpdatedAt = dispatch.StatusPending, r.Step+1, nil, ev.at
	if approval {
		next.Approval, next.Confirmed = ev.approval, true
		return nil
	}
	next.Resume = &tools.Resumption{For: r.Wait.For, State: r.Wait.State, Answer: ev.answer, Step: r.Step}
	return nil
}

// end makes next the record of an execution that ended with ev's status
// and envelope: what it no longer needs (its arguments, a token, the
// resumption, a wait's state) is dropped.
func end(next *Record, ev event) {
	env := *ev.env
	env.ExecutionID = next.ID
	env.Status, env.Success = ev.status, ev.status == dispatch.StatusSuccess
	if ev.approval != nil {
		next.Approval = ev.approval
	}
	next.Status, next.Envelope, next.Arguments, next.ConfirmToken, next.UpdatedAt = ev.status, env.AppendJSON(nil), nil, "", ev.at
	next.env, next.Resume, next.Quiet = &env, nil, ev.quiet
	next.AuditAfter, next.ArgsSHA256 = ev.auditAfter, ev.argsSHA256
	if next.Wait != nil {
		w := *next.Wait
		w.State = nil // the tool's own: no longer needed
		next.Wait = &w
	}
}

// how says how commit meets the store.
type how struct {
	// budget is how long a store that is away is ridden out; 0 makes one
	// attempt, whose conflict is the answer.
	budget time.Duration
	// overwrite meets a conflict with the record as it is now: if ev may
	// still happen to it, the record ev made is written at its revision
	// (the outcome stands: a cancellation asked meanwhile does not undo
	// it); if not, apply's refusal (errFinal: another replica ended it).
	// Without it a conflict is the answer, unless the record reads as
	// this very write (an earlier attempt landed, its answer lost).
	overwrite bool
}

// wrote is a record commit wrote: its revision, and its bytes as stored
// (a work message carries them).
type wrote struct {
	rec  *Record
	rev  uint64
	body []byte
}

// commit writes what ev makes of cur, the record at rev (nil: a new
// execution): the one compare-and-set of an execution's record. A move the
// table does not have is refused before anything is written.
func (s *Service) commit(ctx context.Context, cur *Record, rev uint64, ev event, h how) (wrote, error) {
	next, err := apply(cur, ev)
	if err != nil {
		return wrote{}, err
	}
	key, body := next.key(), next.encode()
	var nrev uint64
	op := func(ctx context.Context) (err error) {
		if cur == nil {
			nrev, err = s.create(ctx, key, body)
			return err
		}
		nrev, err = s.st.Executions.Update(ctx, key, body, rev)
		switch {
		case !errors.Is(err, state.ErrConflict) || h.budget == 0 && !h.overwrite:
			return err
		case !h.overwrite:
			nrev, err = s.landed(ctx, key, body, nrev, err)
			return err
		}
		b, crev, err := s.st.Executions.Get(ctx, key)
		if err != nil {
			return err
		}
		if bytes.Equal(b, body) {
			nrev = crev
			return nil // an earlier attempt's, its answer lost: this write, landed
		}
		now, derr := decodeRecord(b)
		if derr != nil {
			return fmt.Errorf("%w (%v)", errFinal, derr) // unreadable: nothing more to write on it
		}
		if _, err := apply(now, ev); err != nil {
			return err
		}
		rev = crev
		return fmt.Errorf("%w: the record changed", state.ErrUnavailable) // again, at its revision
	}
	if h.budget > 0 {
		err = s.retryStore(ctx, h.budget, op)
	} else {
		err = op(ctx)
	}
	if err != nil {
		return wrote{}, err
	}
	return wrote{rec: next, rev: nrev, body: body}, nil
}

// create writes a new record. A retry that finds it there already (the
// first attempt landed, its answer was lost) takes it as written: its key
// holds a fresh random id, so nobody else's record can be there.
func (s *Service) create(ctx context.Context, key string, body []byte) (uint64, error) {
	rev, err := s.st.Executions.Create(ctx, key, body)
	return s.landed(ctx, key, body, rev, err)
}

// landed takes a write's conflict as its success when the key holds body
// already: a retry of a write whose first attempt landed with its answer
// lost. A record's body is its own (a fresh id, a step, a time), so no
// other writer's record reads the same. A conflict that cannot be read is
// the store being away, not an answer: it may be the first attempt itself,
// proposed to a stream leader that lost its quorum — it conflicts with the
// retry at once and is committed once the quorum is back (the chaos
// harness's quorum loss: a resumption answered 503 whose write landed 20 s
// later, its step left pending with no message).
func (s *Service) landed(ctx context.Context, key string, body []byte, rev uint64, err error) (uint64, error) {
	if !errors.Is(err, state.ErrConflict) {
		return rev, err
	}
	b, cur, gerr := s.st.Executions.Get(ctx, key)
	switch {
	case gerr == nil && bytes.Equal(b, body):
		return cur, nil
	case unavailable(gerr):
		return 0, gerr
	}
	return 0, err
}
