package tools

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a failure; it is the envelope's error.type.
type Kind string

// The error kinds of the envelope.
const (
	ValidationError      Kind = "validation_error"
	UserError            Kind = "user_error"
	PermissionError      Kind = "permission_error"
	SecurityError        Kind = "security_error"
	SystemError          Kind = "system_error"
	TimeoutError         Kind = "timeout_error"
	OverloadError        Kind = "overload_error"
	ConfirmationRequired Kind = "confirmation_required"
	NotFound             Kind = "not_found"
)

// Kinds lists every kind (the contract file and tests enumerate them).
var Kinds = []Kind{ValidationError, UserError, PermissionError, SecurityError,
	SystemError, TimeoutError, OverloadError, ConfirmationRequired, NotFound}

// Error is a failure a caller (usually a model) can act on. Message and
// Suggestion are shown to the caller; Err is only logged.
type Error struct {
	Kind Kind
	// Code is a stable, machine-readable refinement of Kind, such as
	// CodeConflict or CodeBinaryFile; optional. codes.go declares them all.
	Code       Code
	Message    string
	Suggestion string
	Fields     []FieldError
	RetryAfter time.Duration
	// Retryable marks a failure the same call may get past later (a remote
	// service that is down or answered 5xx). Overload and timeout errors
	// are retryable whatever it says.
	Retryable bool
	// Result is what the tool produced with its failure, for the caller
	// to read (a command's exit code, stdout and stderr): the envelope
	// carries it as data, encoded and sanitized as any result.
	Result any
	// Upstream, AuthorizeURL and Credential say what the caller must do
	// before a downstream accepts calls as them: connect Upstream at
	// AuthorizeURL (authorization_required), or set the credential named
	// Credential (credential_required). Never a credential's value.
	Upstream     string
	AuthorizeURL string
	Credential   string
	Err          error
}

// FieldError names one failing field of the arguments by JSON pointer.
type FieldError struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// String is the field's problem as a sentence names it: its pointer (the
// empty pointer is the arguments as a whole) and the message.
func (f FieldError) String() string {
	if f.Pointer == "" {
		return "(the arguments) " + f.Message
	}
	return f.Pointer + " " + f.Message
}

func (e *Error) Error() string {
	msg := string(e.Kind) + ": " + e.Message
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// WithSuggestion sets the suggestion and returns e, for chaining.
func (e *Error) WithSuggestion(format string, args ...any) *Error {
	e.Suggestion = fmt.Sprintf(format, args...)
	return e
}

// WithCode sets the machine-readable code and returns e.
func (e *Error) WithCode(code Code) *Error {
	e.Code = code
	return e
}

// WithRetryAfter marks e retryable after d and returns e.
func (e *Error) WithRetryAfter(d time.Duration) *Error {
	e.Retryable, e.RetryAfter = true, d
	return e
}

// WithResult attaches what the tool produced with its failure and
// returns e.
func (e *Error) WithResult(v any) *Error {
	e.Result = v
	return e
}

// Wrap records the underlying cause (logged, never shown) and returns e.
func (e *Error) Wrap(err error) *Error {
	e.Err = err
	return e
}

// Errorf builds an error of the given kind.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// NewUserError reports an expected failure the caller can fix ("file not
// found"); it is information for the model, answered with HTTP 200.
func NewUserError(format string, args ...any) *Error { return Errorf(UserError, format, args...) }

// NewSecurityError reports a refused attempt to cross a boundary.
func NewSecurityError(format string, args ...any) *Error {
	return Errorf(SecurityError, format, args...)
}

// NewPermissionError reports an operation the caller may not perform.
func NewPermissionError(format string, args ...any) *Error {
	return Errorf(PermissionError, format, args...)
}

// AsError returns err as a *Error when it is (or wraps) one.
func AsError(err error) (*Error, bool) {
	var te *Error
	ok := errors.As(err, &te)
	return te, ok
}
