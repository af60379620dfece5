package server

import (
	"net/http"

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
	code := env.Error.Code
	switch env.Error.Type {
	case tools.UserError:
		return http.StatusOK
	case tools.ValidationError:
		switch code {
		case "idempotency_key_reused":
			return http.StatusUnprocessableEntity
		case "body_too_large":
			return http.StatusRequestEntityTooLarge
		case "body_timeout":
			return http.StatusRequestTimeout // the client stalled while sending it
		case "unsupported_media_type":
			return http.StatusUnsupportedMediaType
		case "method_not_allowed":
			return http.StatusMethodNotAllowed
		case "not_waiting", "execution_ended", "already_decided", "wait_expired", "waits_for_approval":
			return http.StatusConflict // the execution is not in the state the request needs
		}
		return http.StatusBadRequest
	case tools.PermissionError:
		switch code {
		case "unauthenticated":
			return http.StatusUnauthorized
		case "upstream_auth": // the API refused toold's credentials, not the caller's
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
		switch code {
		case "queue_full", "global_capacity", "rate_limited", "upstream_rate_limited", "server_capacity", "principal_rate", "principal_share":
			return http.StatusTooManyRequests
		case "idempotency_in_flight":
			return http.StatusConflict
		case "store_full":
			return http.StatusInsufficientStorage
		}
		return http.StatusServiceUnavailable // queue_timeout, draining, circuit_open, upstream_unavailable, store_unavailable, body_budget, connection_capacity
	case tools.TimeoutError:
		return http.StatusGatewayTimeout
	}
	switch code {
	case "cancelled":
		return StatusClientClosed
	case "upstream_error", "upstream_unreachable", "upstream_unavailable": // the upstream failed, not toold
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// What a request did to an execution resource.
const (
	opSubmit = iota
	opRead
	opCancel
)

// executionStatus is the status of an answer about an execution resource.
// A submit or a cancellation that has not taken effect yet is 202 Accepted
// (a submit whose Prefer: wait saw the end is 200). Reading one that was
// found is 200 with its envelope whatever its outcome: the outcome is the
// envelope's status; the request itself succeeded.
func executionStatus(env *dispatch.Envelope, op int) int {
	if op != opRead && !env.Status.Final() {
		return http.StatusAccepted
	}
	return http.StatusOK
}
