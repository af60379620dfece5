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
