// Package catalog is the search_tools tool: a model asks, in its own
// words, which tools do what it needs, and gets the best matches' names,
// descriptions and input schemas, to call one on its next turn. Its
// description, rendered per caller, names what the caller can find
// (Describe). The
// search itself is the registry's (internal/search), handed in by main:
// this package knows only the tool contract.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
	IncludeSchemas *bool  `json:"include_schemas,omitempty" default:"true" desc:"Return each tool's input schema, to call it next without listing it first (default true; false saves tokens)."`
}

// Out is search_tools' result.
type Out struct {
	Tools []Match `json:"tools"`
}

// Tool returns search_tools, searching with search.
func Tool(search Searcher) tools.Tool {
	return tools.Typed(tools.Spec{
		Name:     Name,
		Title:    "Search tools",
		Effects:  tools.Effects{ReadOnly: true, Idempotent: true},
		Category: tools.Direct,
		Description: "Searches the tools this server offers for the ones that do what you describe, and returns the best matches " +
			"(name, description, input schema), best first, ready to call.",
		Instructions: "Use it whenever the tool you need is not among those you were given: describe the task in a few words, " +
			"then call the tool it names with arguments that fit its input schema.",
		Examples: []tools.Example{{Description: "find a tool", Arguments: []byte(`{"query":"list open pull requests","limit":3}`)}},
	}, func(ctx context.Context, call *tools.Call, in In) (Out, error) {
		limit := in.Limit
		if limit == 0 {
			limit = DefaultLimit
		}
		schemas := in.IncludeSchemas == nil || *in.IncludeSchemas
		matches := search(ctx, Query{Text: in.Query, Limit: limit, Schemas: schemas, Allowed: call.Allowed})
		if matches == nil {
			matches = []Match{}
		}
		return Out{Tools: matches}, nil
	})
}

// maxGroups bounds the integrations a description names: past them it
// says how many more, so a large catalog costs a model a line, not a page.
const maxGroups = 24

// Describe is search_tools' description for a caller whose view of the
// catalog holds integrations (integration -> how many of its tools; ""
// for toold's own): how many tools it can find and of which
// integrations, largest first, so that a model knows what is worth a
// search before it skips one.
func Describe(integrations map[string]int) string {
	type group struct {
		name string
		n    int
	}
	var gs []group
	total := 0
	for name, n := range integrations {
		if n > 0 {
			gs = append(gs, group{name, n})
			total += n
		}
	}
	if total == 0 {
		return "Searches the tools this server offers for the ones that do what you describe. None is available to you now."
	}
	slices.SortFunc(gs, func(a, b group) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.name, b.name)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "Searches the %d %s you can use for the ones that do what you describe, and returns the best matches "+
		"(name, description, input schema), best first, ready to call. They cover: ", total, plural(total, "tool", "tools"))
	for i, g := range gs {
		if i == maxGroups {
			fmt.Fprintf(&b, ", and %d more", len(gs)-maxGroups)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		name := g.name
		if name == "" {
			name = "built-in"
		}
		fmt.Fprintf(&b, "%s (%d)", name, g.n)
	}
	b.WriteString(".")
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
