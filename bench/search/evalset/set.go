// Package evalset reads toold's search evaluation sets and scores rankers
// on them: recall@k and MRR per kind of query (see docs/search.md).
package evalset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/toold/toold/internal/search"
)

// Set is an evaluation set: a catalog of tools and queries with the tools
// that answer them.
type Set struct {
	Tools   []search.Doc
	Queries []Query
}

// Query is one query of a set.
type Query struct {
	Text string
	// Expected are the tools that answer it, any of them equally right.
	Expected []string
	// Kind is verbatim, paraphrased or hard (or whatever a set calls its
	// kinds); Split is dev or holdout ("" for a set that has no split).
	Kind, Split string
}

// LoadText reads the text format of testdata/catalog.txt and
// testdata/queries.txt.
func LoadText(catalog, queries string) (*Set, error) {
	s := &Set{}
	if err := eachLine(catalog, func(line string) error {
		switch {
		case strings.HasPrefix(line, "@"):
		case strings.HasPrefix(line, "  "):
			if len(s.Tools) == 0 {
				return fmt.Errorf("a parameter before any tool: %q", line)
			}
			t := &s.Tools[len(s.Tools)-1]
			t.Params = append(t.Params, textParam(strings.TrimSpace(line)))
		default:
			name, desc, ok := strings.Cut(line, ": ")
			if !ok {
				return fmt.Errorf("not a tool: %q", line)
			}
			s.Tools = append(s.Tools, search.Doc{Name: name, Description: desc})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	err := eachLine(queries, func(line string) error {
		head, text, ok := strings.Cut(line, " | ")
		fs := strings.Fields(head)
		exp, text, ok2 := strings.Cut(text, " | ")
		if !ok || !ok2 || len(fs) != 2 {
			return fmt.Errorf("not a query: %q", line)
		}
		s.Queries = append(s.Queries, Query{Split: fs[0], Kind: fs[1], Text: text, Expected: strings.Split(exp, ",")})
		return nil
	})
	return s, err
}

// textParam reads "name: description", "name=a|b: description", "name#:"
// (an integer) or "name?:" (a boolean).
func textParam(line string) search.Param {
	head, desc, _ := strings.Cut(line, ": ")
	head = strings.TrimRight(head, "#?")
	name, enum, _ := strings.Cut(head, "=")
	p := search.Param{Name: name, Description: desc}
	if enum != "" {
		p.Enum = strings.Split(enum, "|")
	}
	return p
}

func eachLine(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// jsonSet is the JSON format of a set (see docs/search.md): tools as MCP
// lists them (or as OpenAI's and Anthropic's APIs take them), queries with
// the names of the tools that answer them.
type jsonSet struct {
	Tools []struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Input       json.RawMessage `json:"input_schema"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"tools"`
	Queries []struct {
		Query    string          `json:"query"`
		Expected json.RawMessage `json:"expected"`
		Tool     json.RawMessage `json:"tool"`
		Kind     string          `json:"kind"`
		Type     string          `json:"type"`
		Split    string          `json:"split"`
	} `json:"queries"`
}

// LoadJSON reads a set in the JSON format.
func LoadJSON(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var js jsonSet
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &Set{}
	for _, t := range js.Tools {
		schema := t.InputSchema
		for _, alt := range []json.RawMessage{t.Input, t.Parameters} {
			if len(schema) == 0 {
				schema = alt
			}
		}
		s.Tools = append(s.Tools, search.Doc{Name: t.Name, Title: t.Title, Description: t.Description,
			Params: search.ParamsFromSchema(schema)})
	}
	for i, q := range js.Queries {
		exp := q.Expected
		if len(exp) == 0 {
			exp = q.Tool
		}
		names, err := nameList(exp)
		if err != nil || len(names) == 0 || q.Query == "" {
			return nil, fmt.Errorf("%s: query %d needs a query and its expected tool(s)", path, i+1)
		}
		kind := q.Kind
		if kind == "" {
			kind = q.Type
		}
		s.Queries = append(s.Queries, Query{Text: q.Query, Expected: names, Kind: kind, Split: q.Split})
	}
	return s, nil
}

// nameList reads "name" or ["name", ...].
func nameList(raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	err := json.Unmarshal(raw, &many)
	return many, err
}

// Check reports expected tools the catalog lacks and duplicate names.
func (s *Set) Check() error {
	names := map[string]bool{}
	for _, t := range s.Tools {
		if names[t.Name] {
			return fmt.Errorf("tool %q is listed twice", t.Name)
		}
		names[t.Name] = true
	}
	for _, q := range s.Queries {
		for _, e := range q.Expected {
			if !names[e] {
				return fmt.Errorf("query %q expects %q, which the catalog lacks", q.Text, e)
			}
		}
	}
	return nil
}

// CamelCase renames every tool's own name to camelCase, keeping a server
// prefix (github__list_pull_requests -> github__listPullRequests), in the
// catalog and in the queries' expectations.
func (s *Set) CamelCase() {
	rename := func(name string) string {
		server, tool, ok := strings.Cut(name, "__")
		if !ok {
			server, tool = "", name
		}
		parts := strings.Split(tool, "_")
		for i := 1; i < len(parts); i++ {
			if parts[i] != "" {
				parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
			}
		}
		if server == "" {
			return strings.Join(parts, "")
		}
		return server + "__" + strings.Join(parts, "")
	}
	for i := range s.Tools {
		s.Tools[i].Name = rename(s.Tools[i].Name)
	}
	for i := range s.Queries {
		for j, e := range s.Queries[i].Expected {
			s.Queries[i].Expected[j] = rename(e)
		}
	}
}
