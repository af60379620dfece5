package server

import (
	"net/http"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// StatusClientClosed is logged (never seen by the client, who has left) for
// a call whose caller disconnected, as nginx does.
const StatusClientClosed = 499

// httpStatus is the one table from an envelope to an HTTP status. A tool that
// ran to an answer is 200 even when the answer is a user_error: that is
// information for the model, not a transport failure.
func httpStatus(env *dispatch.Envelope) int {
	if env.Status == dispatch.StatusWaiting {
		return http.StatusAccepted // it goes on without the caller: see Location
	}
	if env.Error == nil {
		return http.StatusOK
	}
	switch env.Error.Type {
	case tools.UserError:
		return http.StatusOK
	case tools.ValidationError:
		return validationStatus(env.Error.Code)
	case tools.PermissionError:
		switch env.Error.Code {
		case tools.CodeUnauthenticated:
			return http.StatusUnauthorized
		case tools.CodeUpstreamAuth: // the API refused toold's credentials, not the caller's
			return http.StatusBadGateway
		}
		return http.StatusForbidden
	case tools.SecurityError:
		return http.StatusForbidden
	case tools.NotFound:
		return http.StatusNotFound
	case tools.ConfirmationRequired:
		return http.StatusPreconditionRequired
	case tools.OverloadError:
		return overloadStatus(env.Error.Code)
	case tools.TimeoutError:
		return http.StatusGatewayTimeout
	}
	switch env.Error.Code {
	case tools.CodeCancelled:
		return StatusClientClosed
	case tools.CodeUpstreamError, tools.CodeUpstreamUnreachable, tools.CodeUpstreamUnavailable: // the upstream failed, not toold
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// validationStatus refines 400 for the validation errors that have a
// status of their own.
func validationStatus(code tools.Code) int {
	switch code {
	case tools.CodeIdempotencyKeyReused, tools.CodeInvalidConfig:
		return http.StatusUnprocessableEntity
	case tools.CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case tools.CodeBodyTimeout:
		return http.StatusRequestTimeout // the client stalled while sending it
	case tools.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case tools.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case tools.CodeNotWaiting, tools.CodeExecutionEnded, tools.CodeAlreadyDecided, tools.CodeWaitExpired, tools.CodeWaitsForApproval,
		tools.CodeToolDefinitionChanged, tools.CodeRestartNeeded:
		return http.StatusConflict // the execution is not in the state the request needs
	}
	return http.StatusBadRequest
}

// overloadStatus tells "slow down" (429) from "not now" (503).
func overloadStatus(code tools.Code) int {
	switch code {
	case tools.CodeQueueFull, tools.CodeGlobalCapacity, tools.CodeRateLimited, tools.CodeUpstreamRateLimited,
		tools.CodeServerCapacity, tools.CodePrincipalRate, tools.CodePrincipalShare:
		return http.StatusTooManyRequests
	case tools.CodeIdempotencyInFlight:
		return http.StatusConflict
	case tools.CodeStoreFull:
		return http.StatusInsufficientStorage
	}
	// queue_timeout, draining, circuit_open, upstream_unavailable,
	// store_unavailable, body_budget, connection_capacity, issuer_unavailable
	return http.StatusServiceUnavailable
}

// What a request did to an execution resource.
const (
	opSubmit = iota
	opRead
	opCancel
)

// executionStatus is the status of an answer about an execution resource.
// A submit or a cancellation that has not taken effect yet is 202 Accepted
// (a submit whose Prefer: wait saw the end is 200). A submit nobody waits
// for is 202 whatever its body says — a quick call may have ended before
// the answer (executions' submit window) and its client polls Location
// all the same. Reading one that was found is 200 with its envelope
// whatever its outcome: the outcome is the envelope's status; the request
// itself succeeded.
func executionStatus(env *dispatch.Envelope, op int, wait time.Duration) int {
	if op != opRead && (!env.Status.Final() || op == opSubmit && wait <= 0) {
		return http.StatusAccepted
	}
	return http.StatusOK
}
