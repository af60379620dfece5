package consult

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/toold/toold/internal/tools"
)

// consultIn is consult's arguments.
type consultIn struct {
	Prompt      string  `json:"prompt" desc:"The question, with everything the assistant needs: it does not see your conversation. Secrets and personal data are redacted before it leaves toold."`
	Provider    string  `json:"provider,omitempty" desc:"The provider to ask; without it, failure_type routes to the first available one."`
	Model       string  `json:"model,omitempty" desc:"The model to ask for; without it, the provider's model for failure_type, else its default."`
	FailureType string  `json:"failure_type,omitempty" desc:"The kind of failure being debugged; it chooses the provider and the model."`
	Timeout     float64 `json:"timeout,omitempty" desc:"Seconds the provider may take; it can only shorten the configured timeout." validate:"omitempty,gt=0,lte=3600"`
	Operation   string  `json:"operation,omitempty" desc:"consultation, or review for a longer look (the review timeout applies)." validate:"omitempty,oneof=consultation review"`
}

// shared describes the tools' common behaviour for models.
const shared = " Prompts leave this machine for third-party AI services; toold redacts secrets and personal data " +
	"from them first (the envelope's sanitized says how many). A failed consultation is a result with a status " +
	"(timeout, not_found, invalid_output, error), not a failed call."

// ToolNames are the names of the consultation tools, which a configuration
// may refer to (tools.consult_many) whether or not they could be built.
var ToolNames = []string{"consult", "consult_many", "consult_providers"}

func (s *Set) consultTool() tools.Tool {
	spec := tools.Spec{
		Name:  "consult",
		Title: "Consult an AI assistant",
		Description: "Asks one AI coding assistant — a CLI such as gemini, codex, cursor-agent or claude, or a model API — " +
			"a question and returns its answer with a precise status.",
		Instructions: "Use it for a second opinion on a bug, a failing test, a design or a review. Name a provider, or " +
			"give failure_type (" + s.failureTypes() + ") and toold routes to the first available provider for it." + shared,
		Returns: "tool, status (success | timeout | not_found | invalid_output | error), output (the answer), error, " +
			"duration (s), timestamp, model, exit_code, metadata (routing, stderr's end, usage).",
		Category:   tools.Subtask,
		Parameters: s.parameters(reflect.TypeFor[consultIn](), false),
		Effects:    tools.Effects{ReadOnly: true, Idempotent: true, OpenWorld: true},
		Examples: []tools.Example{
			{Description: "route by failure type", Arguments: json.RawMessage(`{"prompt":"Why does TestParse fail with ` +
				`'expected 3, got 4'? The function: …","failure_type":"assertion"}`)},
			{Description: "a chosen provider", Arguments: json.RawMessage(`{"prompt":"Review this function for race ` +
				`conditions: …","provider":"` + s.names()[0] + `"}`)},
		},
	}
	return tools.Typed(spec, s.consult)
}

func (s *Set) consult(ctx context.Context, call *tools.Call, in consultIn) (Response, error) {
	if err := s.checkPrompt(in.Prompt); err != nil {
		return Response{}, err
	}
	meta := map[string]any{"operation": operation(in.Operation)}
	p := s.providers[in.Provider] // the schema's enum admits only enabled providers
	if in.Provider == "" {
		var skipped []map[string]any
		var by string
		var err error
		if p, skipped, by, err = s.route(ctx, in.FailureType); err != nil {
			return Response{}, err
		}
		meta["routed_by"] = by
		if len(skipped) > 0 {
			meta["route_skipped"] = skipped
		}
	}
	model, err := p.model(in.Model, in.FailureType)
	if err != nil {
		return Response{}, err
	}
	r := p.consult(ctx, query{prompt: in.Prompt, model: model, emit: streamTo(call, p.spec.name),
		timeout: budget(ctx, s.timeoutFor(p, in.Operation, in.Timeout))})
	maps.Copy(r.Metadata, meta)
	return r, nil
}

func operation(op string) string {
	if op == "" {
		return "consultation"
	}
	return op
}

// failureTypes lists the routing table's failure types for the model.
func (s *Set) failureTypes() string {
	var fts []string
	for _, ft := range slices.Sorted(maps.Keys(s.cfg.Routing)) {
		if ft != "default" {
			fts = append(fts, ft)
		}
	}
	if len(fts) == 0 {
		return "any word; no routing table is configured, so the first available provider answers"
	}
	return strings.Join(fts, ", ") + ", or another: the default route then applies"
}

// parameters derives a tool's schema from its arguments' type and adds
// what only the configuration knows: the enabled providers (for provider,
// or providers' items) and the prompt's cap.
func (s *Set) parameters(t reflect.Type, many bool) json.RawMessage {
	raw, err := tools.SchemaFor(t, false)
	if err != nil {
		panic("consult: " + err.Error())
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		panic("consult: " + err.Error())
	}
	props := schema["properties"].(map[string]any)
	names := s.names()
	if many {
		p := props["providers"].(map[string]any)
		p["items"] = map[string]any{"type": "string", "enum": names}
		p["maxItems"], p["minItems"] = len(names), 1
	} else {
		props["provider"].(map[string]any)["enum"] = names
	}
	prompt := props["prompt"].(map[string]any)
	prompt["minLength"], prompt["maxLength"] = 1, s.maxPrompt
	out, err := json.Marshal(schema)
	if err != nil {
		panic("consult: " + err.Error())
	}
	return out
}
