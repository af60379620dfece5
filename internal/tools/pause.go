package tools

import (
	"encoding/json"
	"fmt"
	"time"
)

// A tool may pause instead of answering: it returns a *Pause as its error,
// and the call waits — for a subtask the caller's task system performs (a
// CONTINUATION with a subtask_request), or for a person's answer. While it
// waits the execution is a record in the state store: it holds no bulkhead
// slot and no goroutine. It is resumed, on any replica, with the subtask's
// result or the answer, and the tool's Execute runs again — through the
// whole pipeline — with Call.Resume set; it may answer, or pause again.
//
// The pipeline makes a call wait for a person's approval itself (a tool
// with Confirmation human); tools never pause for that.
type Pause struct {
	// Subtask asks the caller's task system to perform a subtask; its
	// result is the answer.
	Subtask *SubtaskRequest
	// Input asks a person; the answer is checked against Input.Schema.
	Input *InputRequest
	// State is opaque JSON the tool gets back in Call.Resume; it is
	// stored, never shown to the caller.
	State json.RawMessage
	// Timeout bounds the wait; zero takes the tool's wait_timeout (a
	// longer one is cut to it).
	Timeout time.Duration
	// Lineage, for a subtask, is where it stands among subtasks: a later
	// call naming this execution as its parent gets it (Call.Lineage).
	Lineage *Lineage
}

// The things a call can wait for.
const (
	WaitSubtask  = "subtask"
	WaitInput    = "input"
	WaitApproval = "approval"
)

// For is what the pause waits for.
func (p *Pause) For() string {
	if p.Subtask != nil {
		return WaitSubtask
	}
	return WaitInput
}

func (p *Pause) Error() string { return "the tool waits for " + p.For() }

// Check refuses a pause that asks for nothing, or for two things.
func (p *Pause) Check() error {
	if (p.Subtask == nil) == (p.Input == nil) {
		return fmt.Errorf("a pause asks for exactly one of a subtask and an input")
	}
	if p.State != nil && !json.Valid(p.State) {
		return fmt.Errorf("a pause's state must be JSON")
	}
	return nil
}

// SubtaskRequest is the unified tool interface pattern's subtask_request:
// what the caller's task system should do and with what, and hints for
// choosing how.
type SubtaskRequest struct {
	Type          string          `json:"type"`
	Description   string          `json:"description"`
	Inputs        json.RawMessage `json:"inputs,omitempty"`
	TemplateHints []string        `json:"template_hints,omitempty"`
}

// InputRequest asks a person a question, as MCP's elicitation does: a
// prompt, and optionally choices or a JSON Schema the answer must fit.
type InputRequest struct {
	Prompt  string          `json:"prompt"`
	Choices []string        `json:"choices,omitempty"`
	Schema  json.RawMessage `json:"schema,omitempty"`
}

// Resumption is what a paused call resumes with.
type Resumption struct {
	// For is what the call waited for (WaitSubtask or WaitInput).
	For string `json:"for"`
	// State is the Pause's State.
	State json.RawMessage `json:"state,omitempty"`
	// Answer is the subtask's result or the person's answer, checked
	// against the input's schema.
	Answer json.RawMessage `json:"answer"`
	// Step counts the pauses of this execution before this resumption.
	Step int `json:"step"`
}

// Confirmation says who must agree before a tool runs.
type Confirmation string

// The confirmation modes.
const (
	// ConfirmNone: calls run at once.
	ConfirmNone Confirmation = ""
	// ConfirmToken: the first call is answered with a token the host
	// repeats the call with, once its user agreed (the host asks).
	ConfirmToken Confirmation = "token"
	// ConfirmHuman: the call waits for a person with the approve role to
	// approve it (POST /approvals/{id}); the caller cannot.
	ConfirmHuman Confirmation = "human"
)

// Required reports whether a call must be confirmed before it runs.
func (c Confirmation) Required() bool { return c != ConfirmNone }

// ConfirmedIf is the mode of a declared tool's requires_confirmation: a
// token when set, none otherwise.
func ConfirmedIf(required bool) Confirmation {
	if required {
		return ConfirmToken
	}
	return ConfirmNone
}

// Valid reports whether c is a known mode.
func (c Confirmation) Valid() bool {
	return c == ConfirmNone || c == ConfirmToken || c == ConfirmHuman
}

// Lineage is what the pipeline knows of an execution a delegate call names
// as its parent: how deep it is, and the subtasks above it (fingerprints),
// so a tool can bound depth and refuse a cycle.
type Lineage struct {
	Depth        int      `json:"depth"`
	Fingerprints []string `json:"fingerprints"`
}

// Resumed decodes the answer a paused call was resumed with into T; ok is
// false on a call's first run. A typed tool pauses by returning a *Pause
// as its error, and reads its answer with Resumed when it runs again.
func Resumed[T any](c *Call) (answer T, ok bool, err error) {
	if c.Resume == nil {
		return answer, false, nil
	}
	if err := json.Unmarshal(c.Resume.Answer, &answer); err != nil {
		return answer, true, Errorf(ValidationError, "the answer does not fit what the tool expects: %v", err).WithCode(CodeInvalidAnswer)
	}
	return answer, true, nil
}

// ResumedState decodes the state a paused call stored (Pause.State).
func ResumedState[T any](c *Call) (T, error) {
	var st T
	if c.Resume == nil || len(c.Resume.State) == 0 {
		return st, nil
	}
	err := json.Unmarshal(c.Resume.State, &st)
	return st, err
}
