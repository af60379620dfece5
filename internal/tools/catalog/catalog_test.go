package catalog

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// TestSearchTool: search_tools hands the searcher the query, the limit
// (5 when none is asked), whether schemas are wanted and the call's view,
// and answers a list, empty rather than null.
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
		{`{"query":"list issues"}`, DefaultLimit, false, 1},
		{`{"query":"list issues","limit":3,"include_schemas":true}`, 3, true, 1},
		{`{"query":"nothing"}`, DefaultLimit, false, 0},
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
