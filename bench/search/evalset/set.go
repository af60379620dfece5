// Package evalset reads toold's search evaluation sets and scores rankers
// on them: recall@k and MRR per kind of query (see docs/search.md).
package evalset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strings"

	"github.com/toold/toold/internal/search"
)

// Set is an evaluation set: a catalog of tools and queries with the tools
// that answer them.
type Set struct {
	Tools   []search.Doc
	Queries []Query
	// Integration names each tool's integration (its catalog section, or
	// the server part of its name).
	Integration map[string]string
	// Unseen are the integrations held out whatever their name hashes to.
	Unseen map[string]bool
}

// Query is one query of a set.
type Query struct {
	Text string
	// Expected are the tools that answer it, any of them equally right.
	Expected []string
	// Kind is verbatim, paraphrased, hard... (whatever a set calls its
	// kinds); Split is dev or holdout: the split of the expected tools'
	// integrations (see SplitOf).
	Kind, Split string
}

// LoadText reads the text format of testdata/catalog.txt and
// testdata/queries.txt; the catalogs named by unseen hold integrations
// that are held out whatever their names hash to.
func LoadText(catalog, queries string, unseen ...string) (*Set, error) {
	s := &Set{Integration: map[string]string{}, Unseen: map[string]bool{}}
	for i, path := range append([]string{catalog}, unseen...) {
		if err := s.readCatalog(path, i > 0); err != nil {
			return nil, err
		}
	}
	err := eachLine(queries, func(line string) error {
		fs := strings.Split(line, " | ")
		if len(fs) != 3 || strings.ContainsAny(strings.TrimSpace(fs[0]), " \t") {
			return fmt.Errorf("not a query (kind | tools | query): %q", line)
		}
		s.Queries = append(s.Queries, Query{Kind: strings.TrimSpace(fs[0]), Text: fs[2], Expected: strings.Split(fs[1], ",")})
		return nil
	})
	s.assignSplits()
	return s, err
}

// readCatalog reads a catalog in the text format: "@name description"
// opens an integration, "name: description" is a tool, an indented line a
// parameter.
func (s *Set) readCatalog(catalog string, unseen bool) error {
	integration := ""
	return eachLine(catalog, func(line string) error {
		switch {
		case strings.HasPrefix(line, "@"):
			integration = strings.Fields(line[1:] + " ")[0]
			if unseen {
				s.Unseen[integration] = true
			}
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
			s.Integration[name] = integration
		}
		return nil
	})
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
	s := &Set{Integration: map[string]string{}, Unseen: map[string]bool{}}
	for _, t := range js.Tools {
		s.Integration[t.Name] = serverOf(t.Name)
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
		s.Queries = append(s.Queries, Query{Text: q.Query, Expected: names, Kind: kind})
	}
	s.assignSplits()
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
	integration := map[string]string{}
	for i := range s.Tools {
		n := rename(s.Tools[i].Name)
		integration[n] = s.Integration[s.Tools[i].Name]
		s.Tools[i].Name = n
	}
	s.Integration = integration
	for i := range s.Queries {
		for j, e := range s.Queries[i].Expected {
			s.Queries[i].Expected[j] = rename(e)
		}
	}
}

// The splits of a set: a query about an integration of the dev split may
// be looked at, tuned on and designed for; the holdout split is only
// measured, and every figure docs/search.md reports is of it.
const (
	Dev     = "dev"
	Holdout = "holdout"
)

// SplitOf is the split of an integration: holdout for one of Unseen, and
// for a third of the others, chosen by a hash of the name (FNV-1a modulo
// 3 is 0) so that nobody chose which.
func (s *Set) SplitOf(integration string) string {
	h := fnv.New32a()
	h.Write([]byte(integration))
	if s.Unseen[integration] || h.Sum32()%3 == 0 {
		return Holdout
	}
	return Dev
}

// assignSplits sets each query's split: holdout when every tool it
// expects is of a held-out integration.
func (s *Set) assignSplits() {
	for i, q := range s.Queries {
		s.Queries[i].Split = Holdout
		for _, e := range q.Expected {
			if s.SplitOf(s.Integration[e]) == Dev {
				s.Queries[i].Split = Dev
			}
		}
	}
}

// Only returns the set restricted to the tools of split's integrations
// and the queries of split: what tuning on the dev split may see.
func (s *Set) Only(split string) *Set {
	out := &Set{Integration: s.Integration, Unseen: s.Unseen}
	for _, t := range s.Tools {
		if s.SplitOf(s.Integration[t.Name]) == split {
			out.Tools = append(out.Tools, t)
		}
	}
	out.Queries = slices.DeleteFunc(slices.Clone(s.Queries), func(q Query) bool { return q.Split != split })
	return out
}

// serverOf is the server part of a tool's name (github of
// github__list_issues or github.list_issues), or "" for a name without one.
func serverOf(name string) string {
	if srv, _, ok := strings.Cut(name, "__"); ok {
		return srv
	}
	if srv, _, ok := strings.Cut(name, "."); ok {
		return srv
	}
	return ""
}
