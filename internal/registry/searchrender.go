package registry

import (
	"encoding/json"
	"fmt"
)

// OpenAIResponses is the rendering of a search for OpenAI's Responses API:
// one tool_search_output item that loads the matches.
const OpenAIResponses Format = "openai-responses"

// SearchFormats lists the renderings of a search.
var SearchFormats = []Format{Native, OpenAI, OpenAIResponses, Anthropic, MCP}

// ParseSearchFormat accepts a search rendering's name; "" means native.
func ParseSearchFormat(s string) (Format, error) { return parseFormat(s, SearchFormats) }

// SearchItem is a match as the native rendering shows it.
type SearchItem struct {
	Name string `json:"name"`
	// FunctionName is the name function-calling APIs get, when it is not
	// Name; execute accepts either.
	FunctionName string          `json:"function_name,omitempty"`
	Description  string          `json:"description"`
	Score        float64         `json:"score"`
	Category     string          `json:"category"`
	Source       string          `json:"source,omitempty"`
	Parameters   json.RawMessage `json:"parameters"`
}

// RenderSearch renders a search's matches in format f:
//
//   - native: {"query", "tools": [{name, description, score, parameters, ...}]};
//   - openai and mcp: {"query", "tools": [...], "scores": [...]}, the tools
//     as GET /tools renders them (function names), ready for the API;
//   - anthropic: a tool_result block whose content is one tool_reference
//     block per match, as Anthropic's tool search takes it; callID is its
//     tool_use_id (the id of the model's search call);
//   - openai-responses: a tool_search_output item (execution "client")
//     loading the matches as function tools; callID is its call_id.
func RenderSearch(f Format, query string, hits []SearchHit, callID string) ([]byte, error) {
	var v any
	switch f {
	case Native:
		items := make([]SearchItem, len(hits))
		for i, h := range hits {
			e := h.Entry
			items[i] = SearchItem{Name: e.Spec.Name, Description: e.modelDescription(), Score: round(h.Score),
				Category: string(e.Spec.Category), Source: e.Spec.Source, Parameters: e.Spec.Parameters}
			if e.fname != e.Spec.Name {
				items[i].FunctionName = e.fname
			}
		}
		v = map[string]any{"query": query, "tools": items}
	case OpenAI:
		v = scored(query, hits, openAIItem)
	case MCP:
		v = scored(query, hits, func(e *Entry) any { t := e.MCP(); t.Name = e.fname; return t })
	case Anthropic:
		refs := make([]map[string]string, len(hits))
		for i, h := range hits {
			refs[i] = map[string]string{"type": "tool_reference", "tool_name": h.Entry.fname}
		}
		v = map[string]any{"type": "tool_result", "tool_use_id": callID, "content": refs}
	case OpenAIResponses:
		ts := make([]any, len(hits))
		for i, h := range hits {
			ts[i] = responsesFunction(h.Entry, false)
		}
		item := map[string]any{"type": "tool_search_output", "execution": "client", "status": "completed", "tools": ts}
		if callID != "" {
			item["call_id"] = callID
		}
		v = item
	default:
		return nil, fmt.Errorf("unknown search format %q", f)
	}
	return json.MarshalIndent(v, "", "  ")
}

func scored(query string, hits []SearchHit, render func(*Entry) any) map[string]any {
	ts, scores := make([]any, len(hits)), make([]float64, len(hits))
	for i, h := range hits {
		ts[i], scores[i] = render(h.Entry), round(h.Score)
	}
	return map[string]any{"query": query, "tools": ts, "scores": scores}
}

// responsesFunction is a tool as the Responses API takes a function tool.
func responsesFunction(e *Entry, deferred bool) map[string]any {
	t := map[string]any{"type": "function", "name": e.fname, "description": e.modelDescription(),
		"parameters": bareSchema(e.Spec.Parameters), "strict": false}
	if deferred {
		t["defer_loading"] = true
	}
	return t
}

// round keeps scores readable: four decimals say the order.
func round(f float64) float64 { return float64(int64(f*1e4+0.5)) / 1e4 }

// RenderDeferred renders entries for Anthropic's tool search: every tool
// but those loaded reports carries "defer_loading": true, so the model
// sees only the loaded ones (the search tool among them) until a search
// names others with tool_reference blocks.
func RenderDeferred(entries []*Entry, loaded func(*Entry) bool) ([]byte, error) {
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		item := anthropicItem(e).(map[string]any)
		if !loaded(e) {
			item["defer_loading"] = true
		}
		out = append(out, item)
	}
	return json.MarshalIndent(out, "", "  ")
}
