package dispatch

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// confirmed passes calls of tools that need no confirmation, calls that
// passed the gate already (Request.Confirmed: approved, or resumed after a
// confirmed first step), and calls that carry a valid token for exactly
// this caller, tool and arguments (token); a call of a human-confirmed
// tool not yet approved waits for an approval, any other is answered with
// a fresh challenge.
func (d *Dispatcher) confirmed(ctx context.Context, c *call) error {
	switch {
	case c.entry.Spec.Confirmation == tools.ConfirmNone || c.req.Confirmed:
		return nil
	case c.entry.Spec.Confirmation == tools.ConfirmHuman:
		return d.approvalWait(c)
	}
	canonical, err := json.Marshal(c.tree) // map keys sorted: key order and spacing do not matter
	if err != nil {
		return err
	}
	name, gate := c.entry.Spec.Name, d.opts.Confirm
	e := tools.Errorf(tools.ConfirmationRequired, "the tool %q changes things and needs a person to confirm this exact call", name)
	if c.req.ConfirmToken != "" {
		err := gate.CheckFor(ctx, c.req.Caller, name, canonical, c.req.ConfirmToken, c.req.ExecutionID)
		if err == nil {
			return nil
		}
		e = tools.Errorf(tools.ConfirmationRequired, "%v; a new token for this call is attached", err).WithCode(tools.CodeTokenRefused)
	}
	token, exp := gate.Issue(c.req.Caller, name, canonical)
	e.Suggestion = "show the call to a person; if they approve, send the same call again within " +
		time.Until(exp).Round(time.Second).String() + " with the header Toold-Confirm: <error.confirm_token>"
	return &confirmation{err: e, token: token, expires: exp}
}

// confirmation is a challenge: the error and the token that answers it.
type confirmation struct {
	err     *tools.Error
	token   string
	expires time.Time
}

func (c *confirmation) Error() string { return c.err.Error() }
func (c *confirmation) Unwrap() error { return c.err }

// wait is a call that pauses: the tool asked for a subtask or an input, or
// the pipeline for an approval. It travels as the run's error and becomes a
// waiting envelope.
type wait struct {
	info  *Waiting
	pause *tools.Pause // nil for an approval
}

func (w *wait) Error() string { return "the call waits for " + w.info.For }

// approvalRequest is a call waiting for approval: the tool and the
// arguments. The caller (and the activity stream) get them redacted as the
// debug log redacts them; the approver gets the sanitizer's Review of them
// — what will run, real secrets redacted and placed, look-alikes and
// format characters shown — with its notes.
type approvalRequest struct {
	Tool      string                `json:"tool"`
	Caller    string                `json:"caller"`
	Arguments json.RawMessage       `json:"arguments"`
	Review    []sanitize.ReviewNote `json:"review,omitempty"`
}

func (d *Dispatcher) approvalWait(c *call) error {
	args, err := json.Marshal(c.tree)
	if err != nil {
		return err
	}
	name := c.entry.Spec.Name
	req, err := json.Marshal(approvalRequest{Tool: name, Caller: c.req.Caller, Arguments: c.st.Sanitizer.RedactJSON(name, args)})
	if err != nil {
		return err
	}
	shown, notes := c.st.Sanitizer.Review(name, c.tree)
	review, err := json.Marshal(approvalRequest{Tool: name, Caller: c.req.Caller, Arguments: shown, Review: notes})
	if err != nil {
		return err
	}
	return &wait{info: &Waiting{For: tools.WaitApproval, Request: req, Review: review}}
}
