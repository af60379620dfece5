package dispatch

import (
	"encoding/json"
	"time"

	"toold/internal/tools"
)

// confirmed passes calls of tools that need no confirmation, and calls that
// carry a valid token for exactly this caller, tool and arguments; any other
// call is answered with a fresh challenge.
func (d *Dispatcher) confirmed(c *call) error {
	if !c.entry.Spec.RequiresConfirmation {
		return nil
	}
	canonical, err := json.Marshal(c.tree) // map keys sorted: key order and spacing do not matter
	if err != nil {
		return err
	}
	name, gate := c.entry.Spec.Name, d.opts.Confirm
	e := tools.Errorf(tools.ConfirmationRequired, "the tool %q changes things and needs a person to confirm this exact call", name)
	if c.req.ConfirmToken != "" {
		err := gate.Check(c.req.Caller, name, canonical, c.req.ConfirmToken)
		if err == nil {
			return nil
		}
		e = tools.Errorf(tools.ConfirmationRequired, "%v; a new token for this call is attached", err).WithCode("token_refused")
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
