package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/toold/toold/internal/tools"
)

// tool is one declared HTTP API tool: its spec, and the Client that makes
// its requests.
type tool struct {
	spec tools.Spec
	*Client
}

var (
	_ tools.Tool             = (*tool)(nil)
	_ tools.UpstreamReporter = (*tool)(nil)
)

func (t *tool) Spec() tools.Spec { return t.spec }

// Execute sends the request the arguments make, counting its attempts and
// waits into the call for the envelope's timing.
func (t *tool) Execute(ctx context.Context, call *tools.Call) (any, error) {
	args := map[string]any{}
	if err := call.Decode(&args); err != nil {
		return nil, err
	}
	return t.Do(ctx, args, call)
}

// spec is the tool as the registry and models see it.
func spec(tc ToolConfig, params json.RawMessage, method string) (tools.Spec, error) {
	sp := tools.Spec{Name: tc.Name, Title: tc.Title, Description: tc.Description, Instructions: tc.Instructions,
		Category: tools.ExternalAPI, Parameters: params, Confirmation: tools.ConfirmedIf(tc.RequiresConfirmation),
		Limits: tc.Limits.Limits(), Fallback: tc.Fallback, Effects: effects(method, tc), MaxResultBytes: tools.ResultBudget(tc.MaxResultBytes)}
	if tc.Response.Output != nil {
		out, err := json.Marshal(tc.Response.Output)
		if err != nil {
			return sp, fmt.Errorf("response.output: %w", err)
		}
		sp.Output = out
	}
	examples, err := tools.ExamplesOf(tc.Examples)
	sp.Examples = examples
	return sp, err
}

// effects: GET and HEAD read; PUT and DELETE may be repeated, and destroy;
// POST and PATCH may do anything once. Every HTTP tool reaches outside.
// The declaration overrides each.
func effects(method string, tc ToolConfig) tools.Effects {
	e := tools.Effects{OpenWorld: true}
	switch method {
	case http.MethodGet, http.MethodHead:
		e.ReadOnly, e.Idempotent = true, true
	case http.MethodPut, http.MethodDelete:
		e.Idempotent, e.Destructive = true, true
	}
	if tc.ReadOnly != nil {
		e.ReadOnly = *tc.ReadOnly
		e.Idempotent = e.Idempotent || e.ReadOnly
		e.Destructive = e.Destructive && !e.ReadOnly
	}
	if tc.Idempotent != nil {
		e.Idempotent = *tc.Idempotent
	}
	if tc.Destructive != nil {
		e.Destructive = *tc.Destructive
	}
	return e
}
