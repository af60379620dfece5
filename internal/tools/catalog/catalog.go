// Package catalog is the search_tools tool: a model asks, in its own
// words, which tools do what it needs, and gets the best matches' names
// and descriptions (their schemas on request) to call one next. The
// search itself is the registry's (internal/search), handed in by main:
// this package knows only the tool contract.
package catalog

import (
	"context"
	"encoding/json"

	"github.com/toold/toold/internal/tools"
)

// Name is the tool's name.
const Name = "search_tools"

// DefaultLimit is how many matches a search answers when it does not say.
const DefaultLimit = 5

// MaxLimit bounds limit.
const MaxLimit = 50

// Match is a tool a search found.
type Match struct {
	// Name is the tool's function name (server__tool), which every
	// transport accepts.
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Score       float64         `json:"score"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Query is a search as the model asks it.
type Query struct {
	Text  string
	Limit int
	// Schemas asks for each match's input schema.
	Schemas bool
	// Allowed is the caller's view of the catalog (nil: all of it).
	Allowed func(tool string) bool
}

// Searcher answers a query, best match first.
type Searcher func(ctx context.Context, q Query) []Match

// In is search_tools' arguments.
type In struct {
	Query          string `json:"query" desc:"What the tool should do, in your own words (e.g. 'list open pull requests on GitHub')." validate:"min=1,max=1000"`
	Limit          int    `json:"limit,omitempty" desc:"How many tools to return (1-50, default 5)." validate:"min=0,max=50"`
	IncludeSchemas bool   `json:"include_schemas,omitempty" desc:"Also return each tool's input schema, to call it without listing it first."`
}

// Out is search_tools' result.
type Out struct {
	Tools []Match `json:"tools"`
}

// Tool returns search_tools, searching with search.
func Tool(search Searcher) tools.Tool {
	return tools.Typed(tools.Spec{
		Name:        Name,
		Title:       "Search tools",
		Effects:     tools.Effects{ReadOnly: true, Idempotent: true},
		Category:    tools.Direct,
		Description: "Searches the tools this server offers for the ones that do what you describe, and returns the best matches' names and descriptions, best first.",
		Instructions: "Use it when the tool you need is not among those you were given: describe the task in a few words, " +
			"then call the tool it names. Ask for include_schemas to get each tool's parameters.",
		Examples: []tools.Example{{Description: "find a tool", Arguments: []byte(`{"query":"list open pull requests","limit":3}`)}},
	}, func(ctx context.Context, call *tools.Call, in In) (Out, error) {
		limit := in.Limit
		if limit == 0 {
			limit = DefaultLimit
		}
		matches := search(ctx, Query{Text: in.Query, Limit: limit, Schemas: in.IncludeSchemas, Allowed: call.Allowed})
		if matches == nil {
			matches = []Match{}
		}
		return Out{Tools: matches}, nil
	})
}
