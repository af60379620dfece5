package executions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// allowed is the lifecycle table written again, as the package doc states
// it, independently of apply: whether ev may happen to r.
func allowed(r *Record, ev event) bool {
	if ev.move == moveAccept {
		n := ev.record
		return r == nil && n != nil && n.ID != "" && n.Step >= 1 &&
			(slices.Contains([]dispatch.Status{dispatch.StatusPending, dispatch.StatusRunning}, n.Status) || n.Status.Final() ||
				n.Status == dispatch.StatusWaiting && n.Wait != nil)
	}
	if r == nil || r.Status.Final() {
		return false
	}
	waitsFor := ""
	if r.Wait != nil {
		waitsFor = r.Wait.For
	}
	switch st := r.Status; ev.move {
	case moveClaim:
		return st == dispatch.StatusPending || st == dispatch.StatusRunning
	case movePause:
		return st == dispatch.StatusRunning && !r.CancelRequested && ev.env != nil && ev.env.Waiting != nil && ev.wait != nil
	case moveResume:
		return st == dispatch.StatusWaiting && waitsFor != "" && waitsFor != tools.WaitApproval
	case moveApprove:
		return st == dispatch.StatusWaiting && waitsFor == tools.WaitApproval
	case moveWithdraw:
		p := ev.prev
		return st == dispatch.StatusPending && p != nil && p.ID == r.ID && p.Status == dispatch.StatusWaiting && r.Step == p.Step+1
	case moveNoteTimer:
		return st == dispatch.StatusWaiting && r.Wait != nil
	case moveAskCancel, moveYield:
		return st == dispatch.StatusRunning && !r.CancelRequested
	case moveEnd:
		if ev.env == nil || !ev.status.Final() {
			return false
		}
		switch st {
		case dispatch.StatusPending:
			return ev.status == dispatch.StatusCancelled
		case dispatch.StatusRunning:
			return true
		case dispatch.StatusWaiting:
			return ev.status == dispatch.StatusCancelled || ev.status == dispatch.StatusTimeout ||
				ev.status == dispatch.StatusError && ev.approval != nil
		}
	}
	return false
}

// happenings draws events at random, mostly ones that may happen to the
// execution as it is (so sequences go deep), often any other; prev is a
// record the execution was at before, for a withdrawal.
type happenings struct {
	next func(n int) int // [0, n)
	at   time.Time
}

func (g *happenings) pick(n int) int { return g.next(n) }

func (g *happenings) draw(prev *Record) event {
	g.at = g.at.Add(time.Duration(1+g.pick(1000)) * time.Millisecond)
	at := g.at
	statuses := dispatch.ExecutionStatuses
	switch g.pick(10) {
	case 9:
		return yielded(at)
	case 0:
		return claimed(fmt.Sprintf("r%d", g.pick(3)), at)
	case 1:
		for _, f := range []string{tools.WaitApproval, tools.WaitInput, tools.WaitSubtask} {
			if g.pick(3) == 0 {
				env := &dispatch.Envelope{Tool: []string{"", "t", "fallback"}[g.pick(3)], Status: dispatch.StatusWaiting,
					Waiting: &dispatch.Waiting{For: f, Request: json.RawMessage(`{"q":1}`)}}
				return paused(env, &Wait{For: f, Request: env.Waiting.Request, State: json.RawMessage(`{"s":1}`), Since: at,
					ExpiresAt: at.Add(time.Hour)}, at)
			}
		}
		return paused(&dispatch.Envelope{Status: dispatch.StatusWaiting}, nil, at) // says nothing of what it waits for
	case 2:
		return resumedWith(json.RawMessage(`"yes"`), at)
	case 3:
		return approvedBy(&Approval{Approved: true, By: "approver", At: at}, at)
	case 4:
		return withdrawn(prev)
	case 5:
		return timerNoted(uint64(1 + g.pick(100)))
	case 6:
		return cancelAsked(at)
	case 7:
		st := statuses[g.pick(len(statuses))]
		env := dispatch.Failure("req", "t", st, tools.Errorf(tools.SystemError, "it ended %s", st))
		if g.pick(4) == 0 {
			return deniedBy(&Approval{By: "approver", At: at}, env, at)
		}
		return ended(st, env, at)
	default:
		return accepted(newRecord(g, at))
	}
}

// newRecord is an execution as it may be accepted, or not (a status the
// table does not accept with, no wait for a waiting one).
func newRecord(g *happenings, at time.Time) *Record {
	st := dispatch.ExecutionStatuses[g.pick(len(dispatch.ExecutionStatuses))]
	if g.pick(2) == 0 {
		st = dispatch.StatusPending
	}
	r := &Record{ID: "0123456789abcdef01234567", Caller: "k", Kind: "call", Tool: "t", Arguments: json.RawMessage(`{"a":1}`),
		ConfirmToken: "token", RequestID: "req", Status: st, Step: 1, CreatedAt: at, UpdatedAt: at}
	if st == dispatch.StatusWaiting && g.pick(4) != 0 {
		r.Wait = &Wait{For: tools.WaitApproval, Request: json.RawMessage(`{}`), Since: at, ExpiresAt: at.Add(time.Hour)}
	}
	if st.Final() {
		r.Envelope = dispatch.Failure("req", "t", st, tools.Errorf(tools.SystemError, "ended")).AppendJSON(nil)
	}
	return r
}

// drive runs n events of g through the table from nothing, and holds each
// step to the table's properties: apply agrees with allowed; a refused move
// changes nothing and says why (errMove; errFinal once ended); an
// execution ends at most once, and an ended record never changes; and a
// run, however it went, can still end: a legal end exists from every state
// that is not final.
func drive(t *testing.T, g *happenings, n int) {
	t.Helper()
	var cur *Record
	var history []*Record
	endings := 0
	for i := range n {
		var prev *Record
		if len(history) > 1 && g.pick(2) == 0 {
			prev = history[len(history)-2]
		} else if len(history) > 0 {
			prev = history[g.pick(len(history))]
		}
		ev := g.draw(prev)
		var before []byte
		if cur != nil {
			before = cur.encode()
		}
		next, err := apply(cur, ev)
		if want := allowed(cur, ev); (err == nil) != want {
			t.Fatalf("event %d, %s of %s: apply said %v, the table %v", i, ev.move, describe(cur), err, want)
		}
		if cur != nil && !bytes.Equal(before, cur.encode()) {
			t.Fatalf("event %d, %s: apply changed the record it was given", i, ev.move)
		}
		if err != nil {
			if !errors.Is(err, errMove) {
				t.Fatalf("event %d, %s of %s: a refusal that is not the table's: %v", i, ev.move, describe(cur), err)
			}
			if cur != nil && cur.Status.Final() && !errors.Is(err, errFinal) {
				t.Fatalf("event %d, %s of an ended execution: refused as %v, not errFinal", i, ev.move, err)
			}
			continue
		}
		checkMove(t, i, cur, next, ev)
		if next.Status.Final() {
			endings++
		}
		cur = next
		history = append(history, next)
		if cur.Status.Final() {
			continue
		}
		if _, err := apply(cur, ended(dispatch.StatusCancelled, cancelledEnvelope(cur, "now"), g.at)); err != nil &&
			cur.Status != dispatch.StatusRunning {
			t.Fatalf("event %d: no way to end an execution %s: %v", i, cur.Status, err)
		} else if _, err := apply(cur, ended(dispatch.StatusInterrupted, interruptedEnvelope(cur), g.at)); err != nil &&
			cur.Status == dispatch.StatusRunning {
			t.Fatalf("event %d: no way to end a running execution: %v", i, err)
		}
	}
	if endings > 1 {
		t.Fatalf("the execution ended %d times", endings)
	}
}

// checkMove holds one legal move to what the table says it does.
func checkMove(t *testing.T, i int, cur, next *Record, ev event) {
	t.Helper()
	if cur == nil {
		return
	}
	if next.ID != cur.ID || next.Caller != cur.Caller || next.Kind != cur.Kind {
		t.Fatalf("event %d, %s: the execution became another: %+v", i, ev.move, next)
	}
	switch ev.move {
	case moveWithdraw:
		if next.Step != cur.Step-1 || next.Status != dispatch.StatusWaiting {
			t.Fatalf("event %d: withdrawn to step %d %s from step %d", i, next.Step, next.Status, cur.Step)
		}
		return
	case moveResume, moveApprove:
		if next.Step != cur.Step+1 || next.Status != dispatch.StatusPending || next.Wait != nil {
			t.Fatalf("event %d, %s: step %d %s from step %d", i, ev.move, next.Step, next.Status, cur.Step)
		}
		if ev.move == moveApprove && (!next.Confirmed || next.Approval == nil) {
			t.Fatalf("event %d: approved but not confirmed", i)
		}
	case moveYield:
		if next.Status != dispatch.StatusPending || next.Attempt != max(cur.Attempt-1, 0) || next.Step != cur.Step {
			t.Fatalf("event %d: yielded into %s attempt %d step %d", i, next.Status, next.Attempt, next.Step)
		}
		return
	case moveClaim:
		if next.Attempt != cur.Attempt+1 || next.Replica != ev.replica || next.Status != dispatch.StatusRunning {
			t.Fatalf("event %d: claimed as attempt %d on %q (%s)", i, next.Attempt, next.Replica, next.Status)
		}
	case movePause:
		if next.Status != dispatch.StatusWaiting || next.Wait == nil || next.Wait.For != ev.wait.For {
			t.Fatalf("event %d: paused into %s %+v", i, next.Status, next.Wait)
		}
	case moveEnd:
		if next.Status != ev.status || len(next.Arguments) > 0 || next.ConfirmToken != "" || next.Resume != nil || len(next.Envelope) == 0 ||
			next.Wait != nil && next.Wait.State != nil {
			t.Fatalf("event %d: ended as %+v", i, next)
		}
		var env dispatch.Envelope
		if err := json.Unmarshal(next.Envelope, &env); err != nil || env.Status != ev.status || env.ExecutionID != next.ID {
			t.Fatalf("event %d: its envelope %s (%v)", i, next.Envelope, err)
		}
	}
	if next.Step != cur.Step && ev.move != moveResume && ev.move != moveApprove {
		t.Fatalf("event %d, %s moved the step from %d to %d", i, ev.move, cur.Step, next.Step)
	}
	if next.Attempt < cur.Attempt {
		t.Fatalf("event %d, %s took the attempts back", i, ev.move)
	}
}

func describe(r *Record) string {
	if r == nil {
		return "no execution"
	}
	w := ""
	if r.Wait != nil {
		w = " for " + r.Wait.For
	}
	return fmt.Sprintf("an execution %s%s at step %d (cancel asked %v)", r.Status, w, r.Step, r.CancelRequested)
}

// TestLifecycleProperties drives random event sequences through the
// table (drive says what each must hold).
func TestLifecycleProperties(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 38))
		g := &happenings{next: rng.IntN, at: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			drive(t, g, 60)
		})
	}
}

// FuzzLifecycle is TestLifecycleProperties with the fuzzer choosing the
// events: each byte of the input picks the next choice.
func FuzzLifecycle(f *testing.F) {
	f.Add([]byte{8, 0, 0, 1, 0, 2, 7, 3})
	f.Add([]byte{8, 1, 1, 0, 0, 1, 0, 0, 3, 4, 4, 7, 5, 0, 1})
	f.Fuzz(func(t *testing.T, choices []byte) {
		i := 0
		next := func(n int) int {
			if i >= len(choices) {
				return 0
			}
			i++
			return int(choices[i-1]) % n
		}
		drive(t, &happenings{next: next, at: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, len(choices))
	})
}

// TestLifecycleTable: each row of the table, and its refusals, by name.
func TestLifecycleTable(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rec := func(st dispatch.Status, waitFor string) *Record {
		r := &Record{ID: "0123456789abcdef01234567", Caller: "k", Kind: "call", Tool: "t", Status: st, Step: 2, Attempt: 1, CreatedAt: at}
		if waitFor != "" {
			r.Wait = &Wait{For: waitFor, State: json.RawMessage(`{}`)}
		}
		return r
	}
	env := func(st dispatch.Status) *dispatch.Envelope { return &dispatch.Envelope{Status: st} }
	waitEnv := &dispatch.Envelope{Status: dispatch.StatusWaiting, Waiting: &dispatch.Waiting{For: tools.WaitInput}}
	cancelAskedRun := rec(dispatch.StatusRunning, "")
	cancelAskedRun.CancelRequested = true
	for _, c := range []struct {
		name string
		r    *Record
		ev   event
		want error // nil: allowed
	}{
		{"a pending execution is claimed", rec(dispatch.StatusPending, ""), claimed("r1", at), nil},
		{"a lost replica's run is claimed again", rec(dispatch.StatusRunning, ""), claimed("r2", at), nil},
		{"a wait is not claimed", rec(dispatch.StatusWaiting, tools.WaitInput), claimed("r1", at), errMove},
		{"a run pauses", rec(dispatch.StatusRunning, ""), paused(waitEnv, &Wait{For: tools.WaitInput}, at), nil},
		{"a run asked to cancel does not pause", cancelAskedRun, paused(waitEnv, &Wait{For: tools.WaitInput}, at), errCancelAsked},
		{"a pending execution does not pause", rec(dispatch.StatusPending, ""), paused(waitEnv, &Wait{For: tools.WaitInput}, at), errMove},
		{"an answer resumes a question", rec(dispatch.StatusWaiting, tools.WaitInput), resumedWith(nil, at), nil},
		{"an answer does not resume an approval", rec(dispatch.StatusWaiting, tools.WaitApproval), resumedWith(nil, at), errMove},
		{"an approval is approved", rec(dispatch.StatusWaiting, tools.WaitApproval), approvedBy(&Approval{}, at), nil},
		{"a question is not approved", rec(dispatch.StatusWaiting, tools.WaitInput), approvedBy(&Approval{}, at), errMove},
		{"a run refused before it ran yields", rec(dispatch.StatusRunning, ""), yielded(at), nil},
		{"a run asked to cancel does not yield", cancelAskedRun, yielded(at), errCancelAsked},
		{"a wait does not yield", rec(dispatch.StatusWaiting, tools.WaitInput), yielded(at), errMove},
		{"a run is asked to cancel", rec(dispatch.StatusRunning, ""), cancelAsked(at), nil},
		{"twice", cancelAskedRun, cancelAsked(at), errMove},
		{"a pending execution ends cancelled", rec(dispatch.StatusPending, ""), ended(dispatch.StatusCancelled, env(""), at), nil},
		{"a pending execution does not end interrupted", rec(dispatch.StatusPending, ""), ended(dispatch.StatusInterrupted, env(""), at), errMove},
		{"a run ends interrupted", rec(dispatch.StatusRunning, ""), ended(dispatch.StatusInterrupted, env(""), at), nil},
		{"a run does not end pending", rec(dispatch.StatusRunning, ""), ended(dispatch.StatusPending, env(""), at), errMove},
		{"a wait expires", rec(dispatch.StatusWaiting, tools.WaitInput), ended(dispatch.StatusTimeout, env(""), at), nil},
		{"a wait is denied", rec(dispatch.StatusWaiting, tools.WaitApproval), deniedBy(&Approval{}, env(""), at), nil},
		{"a wait does not end in an error undecided", rec(dispatch.StatusWaiting, tools.WaitApproval), ended(dispatch.StatusError, env(""), at), errMove},
		{"a wait does not end success", rec(dispatch.StatusWaiting, tools.WaitInput), ended(dispatch.StatusSuccess, env(""), at), errMove},
		{"an end never changes", rec(dispatch.StatusSuccess, ""), ended(dispatch.StatusSuccess, env(""), at), errFinal},
		{"an end is never claimed", rec(dispatch.StatusInterrupted, ""), claimed("r1", at), errFinal},
		{"an existing execution is not accepted again", rec(dispatch.StatusPending, ""), accepted(rec(dispatch.StatusPending, "")), errMove},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := apply(c.r, c.ev)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("apply: %v, want %v", err, c.want)
			}
			if (err == nil) != allowed(c.r, c.ev) {
				t.Fatalf("the table written again disagrees: %v", allowed(c.r, c.ev))
			}
		})
	}
}
