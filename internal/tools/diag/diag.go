// Package diag holds diagnostic tools: echo and sleep. They touch nothing
// outside toold, so an operator can enable them to smoke-test a deployment's
// whole pipeline (auth, validation, limits, metrics) and the load harness in
// bench/ drives them. Both are off in the default configuration.
package diag

import (
	"context"
	"time"

	"github.com/toold/toold/internal/tools"
)

// EchoIn is echo's arguments.
type EchoIn struct {
	Message string         `json:"message" desc:"Text to send back." validate:"max=65536"`
	Data    map[string]any `json:"data,omitempty" desc:"Any JSON object to send back unchanged."`
}

// EchoOut is echo's result.
type EchoOut struct {
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
	Length  int            `json:"length" desc:"Length of message in bytes."`
}

// Echo returns a tool that answers with its arguments.
func Echo() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:         "echo",
		Title:        "Echo",
		Effects:      tools.Effects{ReadOnly: true, Idempotent: true},
		Description:  "Returns the message (and optional data) it is given, unchanged.",
		Instructions: "Use it to check that the tool server works end to end; it has no effect.",
		Category:     tools.Direct,
		Examples:     []tools.Example{{Description: "a round trip", Arguments: []byte(`{"message":"hello"}`)}},
	}, func(ctx context.Context, _ *tools.Call, in EchoIn) (EchoOut, error) {
		return EchoOut{Message: in.Message, Data: in.Data, Length: len(in.Message)}, nil
	})
}

// SleepIn is sleep's arguments.
type SleepIn struct {
	MS int `json:"ms" desc:"Milliseconds to wait." validate:"min=0,max=600000"`
}

// SleepOut is sleep's result.
type SleepOut struct {
	SleptMS int64 `json:"slept_ms"`
}

// Sleep returns a tool that waits, honouring cancellation: a stand-in for
// a slow tool when exercising limits, deadlines and drain.
func Sleep() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:         "sleep",
		Title:        "Sleep",
		Effects:      tools.Effects{ReadOnly: true, Idempotent: true},
		Description:  "Waits for the given number of milliseconds, then returns.",
		Instructions: "Use it only to test timeouts and concurrency limits.",
		Category:     tools.Direct,
	}, func(ctx context.Context, _ *tools.Call, in SleepIn) (SleepOut, error) {
		start := time.Now()
		t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return SleepOut{}, ctx.Err()
		}
		return SleepOut{SleptMS: time.Since(start).Milliseconds()}, nil
	})
}
