package state

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestClassifyWrongLastSequence: both codes JetStream uses for a wrong
// expected last sequence (a replicated stream answers with the second)
// are ErrConflict, keeping the cause.
func TestClassifyWrongLastSequence(t *testing.T) {
	for _, code := range []jetstream.ErrorCode{jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant} {
		cause := &jetstream.APIError{Code: 400, ErrorCode: code, Description: "wrong last sequence: 7"}
		err := classify(cause)
		var api *jetstream.APIError
		if !errors.Is(err, ErrConflict) || !errors.As(err, &api) || api.ErrorCode != code {
			t.Errorf("code %d: %v", code, err)
		}
	}
}

// TestClassifyFull: the server's codes for a store out of room are ErrFull,
// whatever their text; refusals that merely say "maximum" (a message too
// large for the stream, too many consumers) are not: waiting for space
// would not help them.
func TestClassifyFull(t *testing.T) {
	for _, tt := range []struct {
		code jetstream.ErrorCode
		desc string
		full bool
	}{
		{10023, "insufficient resources", true},
		{10047, "insufficient storage resources available", true},
		{10077, "maximum bytes exceeded", true},
		{10077, "maximum messages exceeded", true},
		{10054, "message size exceeds maximum allowed", false},
		{10026, "maximum consumers limit reached", false},
	} {
		cause := &jetstream.APIError{Code: 400, ErrorCode: tt.code, Description: tt.desc}
		err := classify(cause)
		var api *jetstream.APIError
		if errors.Is(err, ErrFull) != tt.full || !errors.As(err, &api) || api.ErrorCode != tt.code {
			t.Errorf("code %d %q: %v; want ErrFull %v, the cause kept", tt.code, tt.desc, err, tt.full)
		}
	}
}

// TestClassifyBetweenLeaders: the codes a cluster answers with while it
// has no leader for its meta group or a stream (a lost quorum coming
// back) are ErrUnavailable, which callers ride out within their budget;
// other server errors are not.
func TestClassifyBetweenLeaders(t *testing.T) {
	for _, tt := range []struct {
		code        jetstream.ErrorCode
		status      int
		desc        string
		unavailable bool
	}{
		{10008, 503, "JetStream system temporarily unavailable", true},
		{10118, 500, "stream is offline", true},
		{10194, 500, "stream is offline: no quorum", true},
		{10163, 503, "expected last sequence per subject temporarily unavailable", true},
		{10059, 404, "stream not found", false},
		{10054, 400, "message size exceeds maximum allowed", false},
	} {
		cause := &jetstream.APIError{Code: tt.status, ErrorCode: tt.code, Description: tt.desc}
		err := classify(cause)
		var api *jetstream.APIError
		if errors.Is(err, ErrUnavailable) != tt.unavailable || !errors.As(err, &api) || api.ErrorCode != tt.code {
			t.Errorf("code %d %q: %v; want ErrUnavailable %v, the cause kept", tt.code, tt.desc, err, tt.unavailable)
		}
	}
}
