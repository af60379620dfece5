package executions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
)

// PendingApproval is a call waiting for a person's approval, as approvers
// list it: the tool, who called, the arguments redacted, since when.
type PendingApproval struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Caller string `json:"caller"`
	// Principal is who made the call, beyond Caller's name: a token's
	// subject at its issuer, and the client acting for them.
	Principal *auth.Identity  `json:"principal,omitempty"`
	Request   json.RawMessage `json:"request"`
	Since     time.Time       `json:"since"`
	WaitingMS int64           `json:"waiting_ms"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// Approvals lists the calls waiting for approval, oldest first; expired
// ones are left out (their timers end them).
func (s *Service) Approvals(ctx context.Context) ([]PendingApproval, error) {
	if s.st == nil {
		return nil, errNoStore
	}
	keys, err := s.st.Waits.Keys(ctx, openKey(">")) // none: nil, nil
	if err != nil {
		return nil, StoreError(err)
	}
	now := time.Now()
	out := []PendingApproval{}
	for _, key := range keys {
		e, err := s.waitEntry(ctx, key)
		if err != nil || e.Ended || e.For != tools.WaitApproval || now.After(e.ExpiresAt) {
			continue
		}
		out = append(out, PendingApproval{ID: e.ID, Tool: e.Tool, Caller: e.Caller, Principal: e.Principal, Request: e.Request, Since: e.Since,
			WaitingMS: now.Sub(e.Since).Milliseconds(), ExpiresAt: e.ExpiresAt})
	}
	slices.SortFunc(out, func(a, b PendingApproval) int { return a.Since.Compare(b.Since) })
	return out, nil
}

func (s *Service) waitEntry(ctx context.Context, key string) (*waitEntry, error) {
	b, _, err := s.st.Waits.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var e waitEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Decision is an approver's answer to a call waiting for approval; with
// Approve and Reason left out, it is who asks to decide (MayDecide).
type Decision struct {
	Approve bool
	Reason  string
	// By is the approver's name (a key's, or a token's subject at its
	// issuer: self-approval is judged by it, so by subject, whichever
	// client either used); Approver the rest of who they are.
	// RequestID is the request that carried the decision, for the audit
	// log.
	By, RequestID string
	Approver      *auth.Identity
	// Anonymous says the approver is nobody's in particular: toold has no
	// credentials, and every process that reaches it locally — a tool's
	// own included — is this one caller.
	Anonymous bool
	// SelfApproval is approvals.self_approval: a caller may decide on its
	// own calls, and without credentials the anonymous caller may decide
	// at all.
	SelfApproval bool
	// Gate, when set, is the policy's word on whether the approver may
	// decide on a call of tool with args (the approve action): nil, or
	// the refusal.
	Gate func(tool string, args json.RawMessage) *tools.Error
}

// MayDecide is the one rule of who may decide on a call waiting for a
// person, called by caller: nil when d's approver may, else the refusal,
// saying why and what to set. An approval is a person's: a key (or a
// token's subject) may not decide on its own call, and the anonymous
// caller — whoever reaches toold locally, which is also every tool with
// the network and every consultation CLI — may not decide at all, unless
// the operator sets approvals.self_approval.
func MayDecide(d Decision, caller string) *tools.Error {
	switch {
	case d.SelfApproval:
		return nil
	case d.Anonymous:
		return tools.NewPermissionError("toold has no API keys or tokens, so it cannot tell a person from the tool whose call waits: " +
			"the anonymous caller may not approve or deny").WithCode(tools.CodeAnonymousApproval).
			WithSuggestion("configure API keys (auth.keys) or an issuer and give the approver the approve role; or, for a single-user " +
				"machine where any local process may decide, set approvals.self_approval: true")
	case d.By == caller:
		return tools.NewPermissionError("%s made this call and may not decide on it", approverNoun(d)).WithCode(tools.CodeSelfApproval).
			WithSuggestion("another approver must decide; approvals.self_approval lets a caller approve its own calls")
	}
	return nil
}

func errNoApproval(id string) *tools.Error {
	return tools.Errorf(tools.NotFound, "no call waits for approval under the id %q", id).WithCode(tools.CodeNoApproval).
		WithSuggestion("GET /approvals lists the calls waiting now")
}

// Decide approves or denies a call waiting for approval, from any replica:
// approved, the call runs (its next step is queued, confirmed); denied, it
// ends with a permission_error (denied) carrying the reason. Either way the
// decision — who, when, why — is kept in the record and the audit log. A
// call decided already, or whose wait expired, cannot be decided again.
func (s *Service) Decide(ctx context.Context, id string, d Decision) (*Record, error) {
	if s.st == nil {
		return nil, errNoStore
	}
	if !ValidID(id) {
		return nil, errNoApproval(id)
	}
	for attempt := 0; attempt < 5; attempt++ {
		r, rev, err := s.approvalRecord(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.Status != dispatch.StatusWaiting || r.Wait == nil || r.Wait.For != tools.WaitApproval {
			return nil, errDecided(r)
		}
		if err := s.expireIfDue(ctx, r, rev); err != nil {
			return nil, err
		}
		if te := MayDecide(d, r.Caller); te != nil {
			return nil, te
		}
		if d.Gate != nil {
			if te := d.Gate(r.Tool, r.Arguments); te != nil {
				return nil, te
			}
		}
		now := time.Now().UTC()
		decision := &Approval{Approved: d.Approve, By: d.By, Approver: d.Approver, Reason: d.Reason, At: now}
		if d.Approve {
			r, err = s.advance(ctx, r, rev, approvedBy(decision, now))
		} else {
			r, err = s.deny(ctx, r, rev, decision)
		}
		if errors.Is(err, state.ErrConflict) {
			continue // decided, cancelled or expired meanwhile: look again
		}
		if err != nil {
			return nil, err
		}
		s.rec.AdminBy(d.Approver, d.By, map[bool]string{true: "approve", false: "deny"}[d.Approve],
			fmt.Sprintf("execution %s: %s called by %s; reason: %s", id, r.Tool, r.Caller, cmp.Or(strings.TrimSpace(d.Reason), "(none given)")), d.RequestID)
		return r, nil
	}
	return nil, StoreError(state.ErrUnavailable)
}

// approverNoun names the approver refused their own call: a key, or a
// token's subject.
func approverNoun(d Decision) string {
	if a := d.Approver; a != nil && a.Kind == auth.KindToken {
		return fmt.Sprintf("the subject %q of %s", a.Subject, a.Issuer)
	}
	return fmt.Sprintf("the key %q", d.By)
}

// approvalRecord finds the record of a call that waits (or waited) for
// approval through the waits index, whoever made the call.
func (s *Service) approvalRecord(ctx context.Context, id string) (*Record, uint64, error) {
	e, err := s.waitEntry(ctx, openKey(id))
	if errors.Is(err, state.ErrNotFound) {
		e, err = s.waitEntry(ctx, endedKey(id))
	}
	if errors.Is(err, state.ErrNotFound) {
		return nil, 0, errNoApproval(id)
	}
	if err != nil {
		return nil, 0, StoreError(err)
	}
	if e.For != tools.WaitApproval {
		return nil, 0, errNoApproval(id)
	}
	b, rev, err := s.st.Executions.Get(ctx, e.Key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, 0, errNoApproval(id)
	}
	if err != nil {
		return nil, 0, StoreError(err)
	}
	r, err := decodeRecord(b)
	return r, rev, err
}

func errDecided(r *Record) *tools.Error {
	if r.Approval != nil {
		what := map[bool]string{true: "approved", false: "denied"}[r.Approval.Approved]
		return tools.Errorf(tools.ValidationError, "the call %s was %s already, by %s", r.ID, what, r.Approval.By).
			WithCode(tools.CodeAlreadyDecided).WithSuggestion("GET /approvals lists the calls waiting now")
	}
	if r.expired() {
		return errWaitExpired(r)
	}
	return tools.Errorf(tools.ValidationError, "the call %s does not wait for approval (it is %s)", r.ID, r.Status).
		WithCode(tools.CodeAlreadyDecided).WithSuggestion("GET /approvals lists the calls waiting now")
}

// deny ends a call a person refused.
func (s *Service) deny(ctx context.Context, r *Record, rev uint64, decision *Approval) (*Record, error) {
	msg := fmt.Sprintf("a person (%s) denied the call", decision.By)
	if decision.Reason != "" {
		msg += ": " + decision.Reason
	}
	te := tools.NewPermissionError("%s", msg).WithCode(tools.CodeDenied).WithSuggestion("do not repeat the call unless the situation changed")
	w, err := s.commit(ctx, r, rev, deniedBy(decision, dispatch.Failure(r.RequestID, r.Tool, dispatch.StatusError, te), decision.At), how{})
	if err != nil {
		if errors.Is(err, state.ErrConflict) {
			return nil, err
		}
		return nil, StoreError(err)
	}
	s.unindex(ctx, r)
	s.ended(w.rec)
	return w.rec, nil
}
