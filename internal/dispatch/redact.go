package dispatch

import (
	"slices"

	"github.com/toold/toold/internal/tools"
)

// refusalPolicy names the sanitizer policy refusals are redacted with: no
// tool's, so a caller cannot make toold compile (and keep) a policy per
// name it invents, and every detector on, whatever a tool's output policy
// allows — a refusal never needs a secret.
const refusalPolicy = ""

// Redact scrubs, in place, what a failed envelope may repeat of the
// request: the request id and the tool name asked for, the error's
// message, suggestion and fields (JSON pointers name the caller's keys),
// and the same of each fallback step. Whatever the caller sent may hold a
// secret (a model pastes one, a page the model read planted one), and a
// refusal that quotes it writes it into the caller's logs and transcripts.
//
// The pipeline redacts its own failures; a transport calls Redact in the
// one place it writes envelopes, for the refusals it builds itself, so no
// handler has to remember. A success is left alone: its data passed the
// output sanitizer already and its tool is one the registry serves.
// Redacting twice changes nothing.
func (d *Dispatcher) Redact(env *Envelope) {
	if env == nil || env.Error == nil {
		return
	}
	env.RequestID = d.RedactText(env.RequestID)
	env.Tool = d.RedactText(env.Tool)
	env.ExecutionID = d.RedactText(env.ExecutionID)
	d.redactError(env.Error)
	for i := range env.FallbackFrom {
		env.FallbackFrom[i].Tool = d.RedactText(env.FallbackFrom[i].Tool)
		d.redactError(env.FallbackFrom[i].Error)
	}
}

// RedactText is Redact for a text a transport writes outside an envelope
// (an MCP protocol error, a header).
func (d *Dispatcher) RedactText(s string) string {
	if s == "" {
		return s
	}
	return d.current().Sanitizer.RedactString(refusalPolicy, s)
}

func (d *Dispatcher) redactError(e *ErrorBody) {
	if e == nil {
		return
	}
	e.Message = d.RedactText(e.Message)
	e.Suggestion = d.RedactText(e.Suggestion)
	if len(e.Fields) > 0 {
		e.Fields = slices.Clone(e.Fields) // the tool's error may be shared
		for i, f := range e.Fields {
			e.Fields[i] = tools.FieldError{Pointer: d.RedactText(f.Pointer), Message: d.RedactText(f.Message)}
		}
	}
}
