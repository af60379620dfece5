package executions

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// Call is one async call as a transport received it.
type Call struct {
	Tool      string
	Body      []byte
	RequestID string
	Caller    string
	// Principal is who the call is for (dispatch.Request.Principal); the
	// record keeps it.
	Principal *auth.Identity
	// Allowed reports whether the caller may use a tool (checked before
	// the call is accepted; the replica that runs it has no keyring).
	Allowed      func(string) bool
	Timeout      time.Duration
	ConfirmToken string
	// Raw keeps Body as the arguments even when it is {"arguments": {...}}
	// (MCP sends the arguments themselves; REST may wrap them).
	Raw bool
	// Wait is how long the caller waits for the end (Prefer: wait): such
	// a call runs where it is accepted, and one that ends within a moment
	// is kept with one write (inline.go).
	Wait time.Duration
}

// Submit checks a call and, when it could run, accepts it: what keeps it
// is written before Submit returns, so an accepted execution survives this
// replica. One whose caller waits for it runs here at once when a slot is
// free (inline.go); otherwise its record and a work-queue message are
// written for any replica's workers. A refusal comes back as an envelope (the one a sync
// call would get), and so does the end of a call that ran but that the
// store could not keep; a store failure as an error.
func (s *Service) Submit(ctx context.Context, c Call) (*Record, *dispatch.Envelope, error) {
	if err := s.accepting(); err != nil {
		return nil, nil, err
	}
	req := dispatch.NewRequest(c.Tool, c.Body, c.RequestID, dispatch.From{Name: c.Caller, Identity: c.Principal, Allowed: c.Allowed})
	req.Unwrap, req.Timeout, req.ConfirmToken = !c.Raw, c.Timeout, c.ConfirmToken
	req.Via = policy.ViaExecution // as the worker will run it
	if env := s.disp.Check(ctx, req); env != nil {
		return nil, env, nil
	}
	now := time.Now().UTC()
	r := &Record{ID: newID(now), Caller: c.Caller, Principal: c.Principal, Kind: "call", Tool: c.Tool, Arguments: c.Body,
		TimeoutMS:    c.Timeout.Milliseconds(),
		ConfirmToken: c.ConfirmToken, RequestID: c.RequestID, Status: dispatch.StatusPending, Step: 1, CreatedAt: now, UpdatedAt: now}
	if rec, env, ok, err := s.submitInline(ctx, r, c.Wait); ok {
		return rec, env, err
	}
	if err := s.accept(ctx, r); err != nil {
		return nil, nil, err
	}
	return r, nil, nil
}

// SubmitBatch accepts a batch to run asynchronously, for the principal ctx
// carries (auth.IdentityFrom). Each call is checked as the pipeline checks
// it (the tool, the key, the arguments) before the batch is accepted: a
// batch with a call that can never run is refused at once, naming the
// call. Confirmation is left to the run, as in a batch
// run now: no token can be sent for one call of a batch.
func (s *Service) SubmitBatch(ctx context.Context, b *BatchRequest, caller, requestID string, allowed func(string) bool) (*Record, *dispatch.Envelope, error) {
	if err := s.accepting(); err != nil {
		return nil, nil, err
	}
	// Accepted now, run later: every call is charged its principal's rate
	// here, as a single async call is when it is accepted, and not again
	// when the batch runs (runBatch).
	if err := s.disp.Charge(caller, len(b.Calls)); err != nil {
		te, _ := tools.AsError(err)
		return nil, dispatch.Failure(requestID, "", dispatch.StatusRejected, te), nil
	}
	for i, c := range b.Calls {
		req := dispatch.NewRequest(c.Tool, c.Arguments, requestID+"."+c.ID,
			dispatch.From{Name: caller, Identity: auth.IdentityFrom(ctx), Allowed: allowed})
		req.Via = policy.ViaBatch
		if env := s.disp.Validate(ctx, req); env != nil {
			return nil, inBatch(env, requestID, i), nil
		}
	}
	now := time.Now().UTC()
	r := &Record{ID: newID(now), Caller: caller, Principal: auth.IdentityFrom(ctx), Kind: "batch", Batch: b, RequestID: requestID,
		Status: dispatch.StatusPending, Step: 1, CreatedAt: now, UpdatedAt: now}
	if err := s.accept(ctx, r); err != nil {
		return nil, nil, err
	}
	return r, nil, nil
}

// inBatch turns the refusal of a batch's call i into the batch's: its
// fields point into the call (the call's tool when it names none).
func inBatch(env *dispatch.Envelope, requestID string, i int) *dispatch.Envelope {
	at := "/calls/" + strconv.Itoa(i)
	e := *env.Error
	e.Fields = nil
	for _, f := range env.Error.Fields {
		e.Fields = append(e.Fields, tools.FieldError{Pointer: at + "/arguments" + f.Pointer, Message: f.Message})
	}
	if e.Fields == nil {
		e.Fields = []tools.FieldError{{Pointer: at + "/tool", Message: e.Message}}
	}
	e.Message = "call " + strconv.Itoa(i) + " of the batch: " + e.Message
	env.Error, env.RequestID = &e, requestID
	return env
}

func (s *Service) accepting() error {
	if s.st == nil {
		return errNoStore
	}
	if s.st.Conn().IsClosed() {
		return StoreError(state.ErrUnavailable)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return errDraining
	}
	return nil
}

// work is a work-queue message: the record as accepted, and its revision,
// so the replica that takes it claims it with one write.
type work struct {
	Key      string          `json:"key"`
	Revision uint64          `json:"rev"`
	Record   json.RawMessage `json:"record"`
	// Step is the record's step the message is for; a message of an
	// earlier step is stale.
	Step int `json:"step,omitempty"`
	// Audit is, instead of the rest, a replica's audit lease (a timer;
	// recovery.go).
	Audit *auditLease `json:"audit,omitempty"`
	// Guard marks a step's guard (a timer; guard.go).
	Guard bool `json:"guard,omitempty"`
}

// accept writes the record and, for a pending execution, queues its run
// (a waiting one's timer is set already), riding out a lost answer
// (acceptBudget). If the
// queue refuses, the record is taken back: the caller is told nothing was
// accepted. (Unless a worker has it already: a publish whose answer was
// lost may have landed, and then the execution runs and is accepted.)
func (s *Service) accept(ctx context.Context, r *Record) error {
	if r.Trace == nil {
		r.Trace = tracing.FromContext(ctx)
	}
	w, err := s.commit(ctx, nil, 0, accepted(r), how{budget: acceptBudget})
	if err != nil {
		// The write may have landed with its answer lost: take it back,
		// since the caller is told nothing was accepted. No worker can
		// have it: its message was never sent.
		s.takeBack(ctx, r.key(), 0)
		return StoreError(err)
	}
	if r.Status == dispatch.StatusPending {
		if err := s.queue(ctx, r, w.body, w.rev, acceptBudget); err != nil && s.takeBack(ctx, r.key(), w.rev) {
			return err
		}
	}
	if r.Status == dispatch.StatusPending {
		s.accepted(r)
	} else {
		s.m.executions.WithLabelValues(string(r.Status)).Inc()
	}
	return nil
}

// takeBack removes a record the caller is to be told was not accepted,
// trying for a short while only, and reports whether it is gone. With rev,
// only the record as written is removed: one a worker claimed meanwhile
// (its message landed after all) runs, and false says so. A store that
// just refused a write (it is full) refuses the removal too, which is a
// write as well: the record is then an orphan, hidden from List and
// removed by sweepOrphans later (still only as written).
func (s *Service) takeBack(ctx context.Context, key string, rev uint64) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	err := s.deleteAt(ctx, key, rev)
	switch {
	case err == nil, errors.Is(err, state.ErrNotFound):
		return true
	case errors.Is(err, state.ErrConflict):
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.orphans) >= maxOrphans {
		s.log.Warn("executions: a record that was not accepted could not be removed; it stays until the retention ends", zap.String("key", key))
		return true
	}
	s.orphans[key] = rev
	return true
}

// deleteAt deletes key, only at rev unless rev is 0.
func (s *Service) deleteAt(ctx context.Context, key string, rev uint64) error {
	if rev == 0 {
		return s.st.Executions.Delete(ctx, key)
	}
	return s.st.Executions.DeleteAt(ctx, key, rev)
}

// maxOrphans bounds the records remembered for removal; past it, a record
// a full store would not let go of stays until the retention.
const maxOrphans = 10_000

// sweepOrphans removes the orphans every interval until ctx ends.
func (s *Service) sweepOrphans(ctx context.Context, interval time.Duration) {
	defer s.wg.Done()
	every(ctx, interval, func() {
		s.mu.Lock()
		orphans := maps.Clone(s.orphans)
		s.mu.Unlock()
		for key, rev := range orphans {
			err := s.deleteAt(ctx, key, rev)
			if err != nil && !errors.Is(err, state.ErrNotFound) && !errors.Is(err, state.ErrConflict) {
				break // still full (or down): next time
			}
			s.mu.Lock()
			delete(s.orphans, key)
			s.mu.Unlock()
		}
	})
}

func (s *Service) orphan(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.orphans[key]
	return ok
}

// errNoExecution answers an id that is unknown to the caller, whether it
// does not exist, expired, or is another key's: 404 alike, so a key cannot
// learn another's ids.
func errNoExecution(id string) *tools.Error {
	return tools.Errorf(tools.NotFound, "there is no execution %q for this API key", id).WithCode(tools.CodeNoExecution).
		WithSuggestion("GET /executions lists this key's executions; results are kept for the store's retention")
}

// Get returns the caller's execution: as this replica wrote it if it
// ended here a moment ago (recent.go), else as the store holds it.
func (s *Service) Get(ctx context.Context, caller, id string) (*Record, error) {
	if r, ok := s.recent.get(caller, id); ok {
		return r, nil
	}
	r, _, err := s.get(ctx, caller, id)
	return r, err
}

func (s *Service) get(ctx context.Context, caller, id string) (*Record, uint64, error) {
	if s.st == nil {
		return nil, 0, errNoStore
	}
	if !ValidID(id) {
		return nil, 0, errNoExecution(id)
	}
	b, rev, err := s.st.Executions.Get(ctx, recordKey(caller, id))
	if errors.Is(err, state.ErrNotFound) {
		return nil, 0, errNoExecution(id)
	}
	if err != nil {
		return nil, 0, readError(err)
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, 0, err
	}
	return r, rev, nil
}

// Cancel stops the caller's execution wherever it runs: a pending one ends
// at once; a running one is told through the record and the cancel
// subject, and Cancel waits briefly for it to end. A final one is returned
// as it is.
func (s *Service) Cancel(ctx context.Context, caller, id string) (*Record, error) {
	for attempt := 0; attempt < 10; attempt++ {
		r, rev, err := s.get(ctx, caller, id)
		if err != nil || r.Status.Final() {
			return r, err
		}
		if r.Status == dispatch.StatusPending || r.Status == dispatch.StatusWaiting {
			when := "before it started"
			if r.Status == dispatch.StatusWaiting {
				when = "while it waited for " + waitNoun(r.Wait.For)
			}
			w, err := s.commit(ctx, r, rev, ended(dispatch.StatusCancelled, cancelledEnvelope(r, when), time.Now().UTC()), how{})
			if errors.Is(err, state.ErrConflict) {
				continue // it started meanwhile
			} else if err != nil {
				return nil, StoreError(err)
			}
			if r.Status == dispatch.StatusWaiting {
				s.unindex(ctx, r)
			}
			s.ended(w.rec)
			return w.rec, nil
		}
		if !r.CancelRequested {
			if _, err := s.commit(ctx, r, rev, cancelAsked(time.Now().UTC()), how{}); errors.Is(err, state.ErrConflict) {
				continue
			} else if err != nil {
				return nil, StoreError(err)
			}
		}
		_ = s.st.Conn().Publish(state.CancelSubject, []byte(id))
		return s.Wait(ctx, caller, id, 2*time.Second)
	}
	return nil, StoreError(state.ErrUnavailable)
}

// cancelledEnvelope ends an execution its caller cancelled (only the
// caller's key can), saying when.
func cancelledEnvelope(r *Record, when string) *dispatch.Envelope {
	te := tools.Errorf(tools.SystemError, "the execution was cancelled by %s %s", r.Caller, when).WithCode(tools.CodeCancelled).
		WithSuggestion("submit it again if it is still needed")
	return dispatch.Failure(r.RequestID, r.Tool, dispatch.StatusCancelled, te)
}

// Filter selects executions in List.
type Filter struct {
	Tool   string
	Status dispatch.Status
	// Kind is "call" or "batch"; "" lists both.
	Kind string
}

// Page is one page of List.
type Page struct {
	Executions []*dispatch.Envelope `json:"executions"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// List returns the caller's executions, newest first, limit at a time,
// after the cursor (the last id of the previous page).
func (s *Service) List(ctx context.Context, caller string, f Filter, cursor string, limit int) (*Page, error) {
	recs, next, err := s.ListRecords(ctx, caller, f, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &Page{Executions: make([]*dispatch.Envelope, 0, len(recs)), Next: next}
	for _, r := range recs {
		page.Executions = append(page.Executions, r.View())
	}
	return page, nil
}

// ListRecords is List's page as records, and the cursor of the next page
// ("" on the last).
func (s *Service) ListRecords(ctx context.Context, caller string, f Filter, cursor string, limit int) ([]*Record, string, error) {
	if s.st == nil {
		return nil, "", errNoStore
	}
	keys, err := s.st.Executions.Keys(ctx, state.OwnerPrefix(caller)+".>")
	if err != nil {
		return nil, "", StoreError(err)
	}
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		if _, id, ok := strings.Cut(k, "."); ok && (cursor == "" || id < cursor) && !s.orphan(k) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	recs := []*Record{}
	for _, id := range ids {
		r, _, err := s.get(ctx, caller, id)
		if err != nil {
			continue // expired between the listing and the read
		}
		if f.Tool != "" && r.Tool != f.Tool || f.Status != "" && r.Status != f.Status || f.Kind != "" && r.Kind != f.Kind {
			continue
		}
		if len(recs) == limit {
			return recs, recs[limit-1].ID, nil
		}
		recs = append(recs, r)
	}
	return recs, "", nil
}
