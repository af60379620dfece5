package server

import (
	"net/http"
	"testing"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// TestStatusTable holds the one table from outcomes to HTTP statuses,
// including the rows of tools that call remote services: a rate limit is
// 429 whoever set it, an open breaker 503, an upstream that failed or
// refused toold's credentials 502, its refusal of the arguments 200.
func TestStatusTable(t *testing.T) {
	tests := []struct {
		kind tools.Kind
		code string
		want int
	}{
		{tools.UserError, "upstream_rejected", http.StatusOK},
		{tools.OverloadError, "queue_full", http.StatusTooManyRequests},
		{tools.OverloadError, "rate_limited", http.StatusTooManyRequests},
		{tools.OverloadError, "upstream_rate_limited", http.StatusTooManyRequests},
		{tools.OverloadError, "circuit_open", http.StatusServiceUnavailable},
		{tools.OverloadError, "draining", http.StatusServiceUnavailable},
		{tools.SystemError, "upstream_error", http.StatusBadGateway},
		{tools.SystemError, "upstream_unreachable", http.StatusBadGateway},
		{tools.SystemError, "invalid_output", http.StatusInternalServerError},
		{tools.SystemError, "", http.StatusInternalServerError},
		{tools.PermissionError, "upstream_auth", http.StatusBadGateway},
		{tools.PermissionError, "forbidden", http.StatusForbidden},
		{tools.PermissionError, "unauthenticated", http.StatusUnauthorized},
		{tools.SecurityError, "ssrf_refused", http.StatusForbidden},
		{tools.ValidationError, "body_too_large", http.StatusRequestEntityTooLarge},
		{tools.ValidationError, "body_timeout", http.StatusRequestTimeout},
		{tools.OverloadError, "body_budget", http.StatusServiceUnavailable},
		{tools.OverloadError, "connection_capacity", http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		env := dispatch.Failure("r", "t", dispatch.StatusError, tools.Errorf(tt.kind, "m").WithCode(tools.Code(tt.code)))
		if got := httpStatus(env); got != tt.want {
			t.Errorf("%s/%s: %d, want %d", tt.kind, tt.code, got, tt.want)
		}
	}
}
