package dispatch

import (
	"encoding/json"
	"math"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// Status is the envelope's outcome.
type Status string

// The outcomes of a call.
const (
	// StatusSuccess: the tool ran and returned a result.
	StatusSuccess Status = "success"
	// StatusError: the tool ran and failed (user, security or system error).
	StatusError Status = "error"
	// StatusTimeout: the deadline passed, queued or running.
	StatusTimeout Status = "timeout"
	// StatusNotFound: no tool of that name.
	StatusNotFound Status = "not_found"
	// StatusInvalidOutput: the result did not fit the tool's output schema.
	StatusInvalidOutput Status = "invalid_output"
	// StatusRejected: refused before running (validation, permission,
	// confirmation, overload, draining).
	StatusRejected Status = "rejected"
)

// The states of an execution that the pipeline itself never reaches: an
// async execution is pending until a replica takes it and running until
// its envelope is final; cancelled and interrupted end it without the
// pipeline's answer (see internal/executions).
const (
	StatusPending     Status = "pending"
	StatusRunning     Status = "running"
	StatusCancelled   Status = "cancelled"
	StatusInterrupted Status = "interrupted"
)

// StatusWaiting: the call paused — the tool waits for a subtask or an
// answer, or the pipeline for a person's approval — and the envelope says
// what for (Waiting). It is not final: the execution resumes.
const StatusWaiting Status = "waiting"

// Statuses lists every status the pipeline answers with.
var Statuses = []Status{StatusSuccess, StatusError, StatusTimeout, StatusNotFound, StatusInvalidOutput, StatusRejected, StatusWaiting}

// ExecutionStatuses lists every status an execution's envelope may carry.
var ExecutionStatuses = append(append([]Status{StatusPending, StatusRunning}, Statuses...), StatusCancelled, StatusInterrupted)

// Final reports whether an execution in this status is over: the
// pipeline's outcomes, cancelled and interrupted. Any other state (pending,
// running, and any added later, such as waiting for input) is not.
func (s Status) Final() bool {
	switch s {
	case StatusSuccess, StatusError, StatusTimeout, StatusNotFound, StatusInvalidOutput, StatusRejected,
		StatusCancelled, StatusInterrupted:
		return true
	}
	return false
}

// Envelope is the one shape of every answer to an execution.
type Envelope struct {
	RequestID  string          `json:"request_id"`
	Tool       string          `json:"tool"`
	Status     Status          `json:"status"`
	Success    bool            `json:"success"`
	Data       json.RawMessage `json:"data"`
	Error      *ErrorBody      `json:"error"`
	DurationMS float64         `json:"duration_ms"`
	Timing     Timing          `json:"timing"`
	StartedAt  time.Time       `json:"started_at"`
	Sanitized  sanitize.Report `json:"sanitized"`
	// ExecutionID names the async execution this envelope belongs to.
	ExecutionID string `json:"execution_id,omitempty"`
	// Redundant marks the answer of an earlier identical call in the same
	// turn (Toold-Turn), given again instead of running the tool.
	Redundant bool `json:"redundant,omitempty"`
	// FallbackFrom lists, in order, the tools that failed before Tool
	// answered, each with why: present only when a fallback ran.
	FallbackFrom []FallbackStep `json:"fallback_from,omitempty"`
	// Waiting says what a waiting call waits for.
	Waiting *Waiting `json:"waiting,omitempty"`
	// TraceID is the call's OpenTelemetry trace id, when tracing is on: a
	// user pastes it into their tracing UI. The caller's own trace when it
	// sent a traceparent.
	TraceID string `json:"trace_id,omitempty"`
	// Principal is who the call was for, as toold authenticated the
	// caller (Request.Principal): a key's holder, or a token's subject at
	// its issuer with the client acting for them. Absent for the
	// anonymous caller.
	Principal *auth.Identity `json:"principal,omitempty"`
	// Artifact is where the whole result is kept when Data is only its
	// head: the result was over the tool's budget (max_result_bytes).
	Artifact *Artifact `json:"artifact,omitempty"`
	// TraceSampled says the call's spans are recorded, so a metric's
	// exemplar may point at the trace; never encoded.
	TraceSampled bool `json:"-"`
	// Pause is the tool's pause, with its private state, for the
	// executions service to store; never encoded.
	Pause *tools.Pause `json:"-"`
}

// Artifact is a result kept whole beside the head an envelope carries.
type Artifact struct {
	// ID names it: GET /artifacts/{id}, or over MCP the resource URI.
	ID string `json:"id"`
	// URI is where its owner reads it: /artifacts/{id}.
	URI string `json:"uri"`
	// Bytes is the size of the whole result (JSON, sanitized as the head
	// was); OmittedBytes how much of it the head leaves out.
	Bytes        int64 `json:"bytes"`
	OmittedBytes int64 `json:"omitted_bytes"`
	// ExpiresAt is when the store lets it go (state.artifacts.retention).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Waiting is what a paused call waits for, as its caller sees it.
type Waiting struct {
	// For is subtask, input or approval.
	For string `json:"for"`
	// Request is the subtask_request, the input request (prompt, choices,
	// schema), or the approval request (tool, redacted arguments).
	Request json.RawMessage `json:"request"`
	// ExpiresAt is when the wait ends in a timeout_error.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Resume is where the answer goes: POST /executions/{id}/resume for a
	// subtask or an input; empty for an approval, which is a person's to
	// give, not the caller's.
	Resume string `json:"resume,omitempty"`
	// Review is an approval's request as the approver is shown it (see
	// approvalRequest): for the approvers' listing only, never encoded.
	Review json.RawMessage `json:"-"`
}

// FallbackStep is a tool that failed in a way a fallback may get past.
type FallbackStep struct {
	Tool       string     `json:"tool"`
	Status     Status     `json:"status"`
	Error      *ErrorBody `json:"error"`
	DurationMS float64    `json:"duration_ms"`
}

// ErrorBody is the envelope's error.
type ErrorBody struct {
	Type       tools.Kind         `json:"type"`
	Code       tools.Code         `json:"code,omitempty"`
	Message    string             `json:"message"`
	Suggestion string             `json:"suggestion,omitempty"`
	Fields     []tools.FieldError `json:"fields,omitempty"`
	// Example is a valid arguments object for the tool, on validation
	// errors, so a model can see the shape it should have sent.
	Example      json.RawMessage `json:"example,omitempty"`
	Retryable    bool            `json:"retryable"`
	RetryAfterMS int64           `json:"retry_after_ms,omitempty"`
	// ConfirmToken answers a confirmation_required error: send the same
	// call again with the header Toold-Confirm set to it, before
	// ConfirmExpiresAt (RFC 3339).
	ConfirmToken     string `json:"confirm_token,omitempty"`
	ConfirmExpiresAt string `json:"confirm_expires_at,omitempty"`
	// Upstream, AuthorizeURL and Credential are tools.Error's: what the
	// caller must connect or set before the downstream accepts the call.
	Upstream     string `json:"upstream,omitempty"`
	AuthorizeURL string `json:"authorize_url,omitempty"`
	Credential   string `json:"credential,omitempty"`
}

// Timing splits the duration into the pipeline's phases.
type Timing struct {
	QueuedMS   float64 `json:"queued_ms"`
	ExecuteMS  float64 `json:"execute_ms"`
	SanitizeMS float64 `json:"sanitize_ms"`
	// Attempts is how many requests a tool that calls a remote service
	// made (the first and its retries); absent for other tools.
	Attempts int `json:"attempts,omitempty"`
	// WaitMS is the part of ExecuteMS such a tool spent waiting before an
	// attempt: backoff, the service's Retry-After, rate limits.
	WaitMS float64 `json:"wait_ms,omitempty"`
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// addMillis adds d to a duration in milliseconds, to the microsecond, so
// that a sum of phases reads 0.084 and not 0.08399999999999999.
func addMillis(ms float64, d time.Duration) float64 {
	return float64(int64(math.Round(ms*1000))+d.Microseconds()) / 1000
}

// Failure builds an envelope for a request refused before it reached the
// pipeline (bad body, no credentials): every transport answers with the same
// shape whatever went wrong.
func Failure(requestID, tool string, status Status, err *tools.Error) *Envelope {
	env := &Envelope{RequestID: requestID, Tool: tool, StartedAt: time.Now().UTC(), Sanitized: sanitize.Report{}}
	env.fail(status, err)
	return env
}

// fail marks the envelope failed with te. Data stays: only a tool's
// failure that carries a result (tools.Error.Result) has set it.
func (env *Envelope) fail(status Status, te *tools.Error) {
	env.Status, env.Success = status, false
	env.Error = &ErrorBody{Type: te.Kind, Code: te.Code, Message: te.Message, Suggestion: te.Suggestion,
		Fields: te.Fields, Retryable: retryable(te), Upstream: te.Upstream, AuthorizeURL: te.AuthorizeURL, Credential: te.Credential}
	if te.RetryAfter > 0 {
		env.Error.RetryAfterMS = max(1, te.RetryAfter.Milliseconds())
	}
}

// retryable: the error says so, or it is an overload or a timeout.
func retryable(te *tools.Error) bool {
	return te.Retryable || te.Kind == tools.OverloadError || te.Kind == tools.TimeoutError
}
