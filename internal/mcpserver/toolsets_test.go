package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/catalog"
)

// searchTool is search_tools over the harness's registry, as main wires it.
func searchTool(snap func() *registry.Registry) tools.Tool {
	return catalog.Tool(func(_ context.Context, q catalog.Query) []catalog.Match {
		var out []catalog.Match
		for _, h := range snap().Search(q.Text, q.Limit, func(e *registry.Entry) bool {
			return e.Spec.Name != catalog.Name && (q.Allowed == nil || q.Allowed(e.Spec.Name))
		}) {
			out = append(out, catalog.Match{Name: h.Entry.FunctionName(), Description: h.Entry.Spec.Description, Score: h.Score})
		}
		return out
	})
}

func testToolsets(t *testing.T) registry.Toolsets {
	t.Helper()
	sets, err := registry.NewToolsets([]registry.Toolset{
		{Name: "ops", Tools: []string{"up.*", "echo", catalog.Name}},
		{Name: "misc", Tools: []string{"misc.*", "sleep", catalog.Name}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sets
}

func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	lr, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lr.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestToolsetServesItsMembers: /mcp/<toolset> lists and calls only the
// toolset's tools, and its search_tools searches only them.
func TestToolsetServesItsMembers(t *testing.T) {
	h := newHarness(t, harnessOpts{toolsets: testToolsets(t)})
	cs := h.clientAt("/mcp/ops", "2025-06-18", "", nil)
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "toolset ops") {
		t.Errorf("instructions: %q", ins)
	}
	if got := listed(t, cs); !slices.Equal(got, []string{"echo", catalog.Name}) {
		t.Errorf("tools/list: %v", got)
	}
	if res, err := callTool(t, cs, "echo", map[string]any{"message": "hi"}, nil); err != nil || res.IsError {
		t.Errorf("echo: %v %v", err, res)
	}
	if _, err := callTool(t, cs, "sleep", map[string]any{"ms": 1}, nil); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("a tool outside the toolset: %v", err)
	}
	res, err := callTool(t, cs, catalog.Name, map[string]any{"query": "sleep wait milliseconds echo message", "limit": 10}, nil)
	if err != nil || res.IsError {
		t.Fatalf("search_tools: %v %v", err, res)
	}
	var out catalog.Out
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range out.Tools {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"echo"}) {
		t.Errorf("search_tools in the toolset found %v", names)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if _, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp/nope", MaxRetries: -1}, nil); err == nil {
		t.Error("a client connected to an unknown toolset")
	}
}

// TestToolsetListChanged: notifications/tools/list_changed reaches the
// clients of a toolset when its members change, and only them. A
// session's notifications arrive in order, so once misc's client hears of
// a change to misc made after a change to ops only, it would have heard of
// the first before, had it been told.
func TestToolsetListChanged(t *testing.T) {
	h := newHarness(t, harnessOpts{toolsets: testToolsets(t)})
	notified := map[string]chan struct{}{"ops": make(chan struct{}, 64), "misc": make(chan struct{}, 64)}
	clients := map[string]*mcp.ClientSession{}
	for name, ch := range notified {
		clients[name] = h.clientAt("/mcp/"+name, "2026-07-28", "", &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} }})
	}
	// The source whose tools each toolset holds.
	source := map[string]string{"ops": "up", "misc": "misc"}
	// Until each subscription is open, a change may go unheard: change
	// each toolset until its client hears it (bounded), then drain.
	for name, ch := range notified {
		heard := false
		for i := 0; i < 50 && !heard; i++ {
			h.live.SetSource(source[name], []tools.Tool{namedTool(source[name] + ".t" + string(rune('a'+i%26)))})
			select {
			case <-ch:
				heard = true
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !heard {
			t.Fatalf("the %s client never heard of a change to its toolset", name)
		}
	}
	drain := func(ch chan struct{}) int {
		n := 0
		for {
			select {
			case <-ch:
				n++
			default:
				return n
			}
		}
	}
	// Both open: change ops only, then misc.
	drain(notified["misc"])
	h.live.SetSource("up", []tools.Tool{namedTool("up.ping")})
	waitFor(t, notified["ops"], "ops, after up changed")
	h.live.SetSource("misc", []tools.Tool{namedTool("misc.final")})
	waitFor(t, notified["misc"], "misc")
	if n := drain(notified["misc"]); n != 0 {
		t.Errorf("the misc client heard %d more changes: a change to ops reached it", n)
	}
	if got := listed(t, clients["ops"]); !slices.Contains(got, "up__ping") || slices.Contains(got, "misc__final") {
		t.Errorf("ops lists %v", got)
	}
}

func waitFor(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no list_changed", what)
	}
}

// namedTool is a hosted tool of the source its name starts with.
type namedTool string

func (n namedTool) Spec() tools.Spec {
	source, _, _ := strings.Cut(string(n), ".")
	return tools.Spec{Name: string(n), Description: "A hosted tool.", Category: tools.MCP, Source: source,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (namedTool) Execute(context.Context, *tools.Call) (any, error) { return map[string]any{}, nil }

// TestSearchToolDescribedOverMCP: tools/list describes search_tools by
// the caller's view: a toolset's client hears of the toolset's tools, a
// client of /mcp of the whole catalog.
func TestSearchToolDescribedOverMCP(t *testing.T) {
	h := newHarness(t, harnessOpts{toolsets: testToolsets(t)})
	description := func(path string) string {
		t.Helper()
		lr, err := h.clientAt(path, "2025-06-18", "", nil).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range lr.Tools {
			if tl.Name == catalog.Name {
				return tl.Description
			}
		}
		t.Fatalf("%s lists no %s", path, catalog.Name)
		return ""
	}
	if got := description("/mcp/ops"); !strings.Contains(got, "the 1 tool you can use") || !strings.Contains(got, "built-in (1).") {
		t.Errorf("/mcp/ops: %q", got)
	}
	whole := description("/mcp")
	lr, err := h.clientAt("/mcp", "2025-06-18", "", nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("the %d tools you can use", len(lr.Tools)-1); !strings.Contains(whole, want) {
		t.Errorf("/mcp: %q lacks %q", whole, want)
	}
}
