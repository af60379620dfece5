package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// TestSearchTool: search_tools hands the searcher the query, the limit
// (5 when none is asked), whether schemas are wanted (unless asked not to)
// and the call's view, and answers a list, empty rather than null.
func TestSearchTool(t *testing.T) {
	var got Query
	tool := Tool(func(_ context.Context, q Query) []Match {
		got = q
		if q.Text == "nothing" {
			return nil
		}
		return []Match{{Name: "github__list_issues", Score: 2}}
	})
	allowed := func(name string) bool { return name == "github.list_issues" }
	for _, tc := range []struct {
		args      string
		limit     int
		schemas   bool
		wantTools int
	}{
		{`{"query":"list issues"}`, DefaultLimit, true, 1},
		{`{"query":"list issues","limit":3,"include_schemas":true}`, 3, true, 1},
		{`{"query":"list issues","include_schemas":false}`, DefaultLimit, false, 1},
		{`{"query":"nothing"}`, DefaultLimit, true, 0},
	} {
		call := tools.NewCall(json.RawMessage(tc.args), "r1", "alice", nil)
		call.Allowed = allowed
		v, err := tool.Execute(context.Background(), call)
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		out := v.(Out)
		if got.Limit != tc.limit || got.Schemas != tc.schemas || got.Allowed == nil || !got.Allowed("github.list_issues") {
			t.Errorf("%s: the searcher got %+v", tc.args, got)
		}
		if b, _ := json.Marshal(out); len(out.Tools) != tc.wantTools || string(b) == `{"tools":null}` {
			t.Errorf("%s: %s", tc.args, b)
		}
	}
	if spec := tool.Spec(); spec.Name != Name || !spec.Effects.ReadOnly || spec.Category != tools.Direct {
		t.Errorf("spec %+v", spec)
	}
}

// TestDescribe: the description counts the caller's tools and names their
// integrations, largest first, toold's own as built-in, and bounds the
// list.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]int
		want []string
		not  []string
	}{
		{"empty", map[string]int{}, []string{"None is available"}, []string{"cover"}},
		{"one", map[string]int{"github": 1}, []string{"the 1 tool you can use", "github (1)."}, nil},
		{"ordered", map[string]int{"slack": 3, "github": 12, "": 2, "jira": 3},
			[]string{"the 20 tools you can use", "They cover: github (12), jira (3), slack (3), built-in (2)."}, nil},
	} {
		got := Describe(tc.in)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: %q holds %q", tc.name, got, w)
			}
		}
	}
	many := map[string]int{}
	for i := range maxGroups + 5 {
		many[fmt.Sprintf("server%02d", i)] = 1
	}
	if got := Describe(many); !strings.Contains(got, ", and 5 more.") || strings.Contains(got, "server28") {
		t.Errorf("a long list: %q", got)
	}
}
