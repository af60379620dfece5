package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/tools"
)

// hostedNames are the tools examples/mcp.yaml serves (the reference
// servers everything and files), and names at the edges of the rules.
var hostedNames = []string{
	"everything.echo", "everything.get-annotated-message", "everything.get-env", "everything.get-resource-links",
	"everything.get-resource-reference", "everything.get-roots-list", "everything.get-structured-content",
	"everything.get-sum", "everything.get-tiny-image", "everything.gzip-file-as-resource",
	"everything.simulate-research-query", "everything.trigger-long-running-operation",
	"files.create_directory", "files.directory_tree", "files.edit_file", "files.get_file_info",
	"files.list_allowed_directories", "files.list_directory", "files.list_directory_with_sizes", "files.move_file",
	"files.read_file", "files.read_media_file", "files.read_multiple_files", "files.read_text_file",
	"files.search_files", "files.write_file",
	// 64 characters with dots: "__" would make it 66.
	"long." + strings.Repeat("x", 53) + ".tail0",
	// names whose readable forms would meet: both hashed.
	"a_.b", "a._b", "x.y__z", "x__y.z",
	"dots..twice", "trailing.", ".leading",
}

func hostedRegistry(t *testing.T) *Registry {
	t.Helper()
	ts := []tools.Tool{tool("read_file", `{"type":"object"}`), tool("a___b", `{"type":"object"}`)}
	for _, n := range hostedNames {
		ts = append(ts, sourced(strings.Split(n, ".")[0], n))
	}
	r, err := New(Options{}, ts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRenderingsFollowTheirConsumersRules renders a registry of hosted
// tools for each consumer and holds every name to that consumer's rule:
// OpenAI's, Anthropic's and MCP hosts' ^[a-zA-Z0-9_-]{1,64}$, and MCP's
// own as the go-sdk checks it when a tool is added. Names are unique in every rendering, and
// each rendered name resolves to its tool.
func TestRenderingsFollowTheirConsumersRules(t *testing.T) {
	r := hostedRegistry(t)
	var openai []struct{ Function struct{ Name string } }
	var anthropic []struct{ Name string }
	var mcpList struct{ Tools []struct{ Name string } }
	renderings := map[Format][]string{}
	for f, v := range map[Format]any{OpenAI: &openai, Anthropic: &anthropic, MCP: &mcpList} {
		b, err := Render(f, r.Entries())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, it := range openai {
		renderings[OpenAI] = append(renderings[OpenAI], it.Function.Name)
	}
	for _, it := range anthropic {
		renderings[Anthropic] = append(renderings[Anthropic], it.Name)
	}
	for _, it := range mcpList.Tools {
		renderings[MCP] = append(renderings[MCP], it.Name)
	}
	// MCP's names follow the hosts' rule, which fits inside MCP's own.
	rules := map[Format]func(string) bool{OpenAI: FunctionNamePattern.MatchString, Anthropic: FunctionNamePattern.MatchString,
		MCP: func(n string) bool { return FunctionNamePattern.MatchString(n) && MCPNamePattern.MatchString(n) }}
	for f, names := range renderings {
		if len(names) != r.Len() {
			t.Errorf("%s lists %d tools, want %d", f, len(names), r.Len())
		}
		seen := map[string]bool{}
		for i, n := range names {
			if !rules[f](n) {
				t.Errorf("%s: name %q breaks the consumer's rule", f, n)
			}
			if seen[n] {
				t.Errorf("%s: name %q twice", f, n)
			}
			seen[n] = true
			if e, ok := r.Lookup(r.Canonical(n)); !ok || e != r.Entries()[i] {
				t.Errorf("%s: name %q does not resolve to %q", f, n, r.Entries()[i].Spec.Name)
			}
		}
	}
	// The go-sdk's own check: it logs (and does not serve) a tool whose
	// name breaks MCP's rule.
	var logs bytes.Buffer
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"},
		&mcp.ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, e := range r.Entries() {
		m := e.MCP()
		srv.AddTool(&mcp.Tool{Name: m.Name, InputSchema: m.InputSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, nil
		})
	}
	if logs.Len() > 0 {
		t.Errorf("the go-sdk refused names: %s", logs.String())
	}
}

func TestFunctionName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"read_file", "read_file"},
		{"everything.get-sum", "everything__get-sum"},
		{"files.read_text_file", "files__read_text_file"},
		{"dots..twice", "dots____twice"},
		{"a_.b", "a__b_" + hash8("a_.b")},
		{"x.y__z", "x_y__z_" + hash8("x.y__z")},
		{"long." + strings.Repeat("x", 53) + ".tail0", "long_" + strings.Repeat("x", 50) + "_" + hash8("long."+strings.Repeat("x", 53)+".tail0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FunctionName(tt.name)
			if got != tt.want {
				t.Errorf("FunctionName(%q) = %q, want %q", tt.name, got, tt.want)
			}
			if !FunctionNamePattern.MatchString(got) {
				t.Errorf("%q breaks %s", got, FunctionNamePattern)
			}
		})
	}
}

func hash8(name string) string {
	s := FunctionName(name)
	return s[len(s)-8:]
}

// TestFunctionNameCollisions: a tool whose function name another tool
// holds is refused naming both, at start and when an upstream server's
// list arrives; the tool already served keeps its names.
func TestFunctionNameCollisions(t *testing.T) {
	_, err := New(Options{}, tool("up__echo", `{"type":"object"}`), sourced("up", "up.echo"))
	if err == nil || !strings.Contains(err.Error(), `tool "up.echo": its name or function name "up__echo" is taken by the tool "up__echo"`) {
		t.Errorf("New: %v", err)
	}
	first, err := New(Options{}, tool("up__echo", `{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(first, Options{})
	errs := live.SetSource("up", []tools.Tool{sourced("up", "up.echo"), sourced("up", "up.sum")})
	if !strings.Contains(joinErrs(errs), `tool "up.echo": its name or function name "up__echo" is taken by the tool "up__echo" (source "toold")`) {
		t.Errorf("SetSource: %v", errs)
	}
	r := live.Load()
	if got := names(r); strings.Join(got, " ") != "up.sum up__echo" {
		t.Errorf("served %v", got)
	}
	if r.Canonical("up__echo") != "up__echo" || r.Canonical("up__sum") != "up.sum" {
		t.Errorf("Canonical: %q %q", r.Canonical("up__echo"), r.Canonical("up__sum"))
	}
	// A later upstream tool cannot take a served tool's function name
	// either.
	errs = live.SetSource("other", []tools.Tool{sourced("other", "up__sum")})
	if !strings.Contains(joinErrs(errs), `tool "up__sum": its name or function name "up__sum" is taken by the tool "up.sum" (source "up")`) {
		t.Errorf("SetSource of a name that is a function name: %v", errs)
	}
}

// FuzzFunctionName: every name maps to one the APIs accept, the same each
// time, and two names never map to one (short of a SHA-256 prefix
// collision, which a fuzzer does not find).
func FuzzFunctionName(f *testing.F) {
	for _, n := range hostedNames {
		f.Add(n, "a___b")
	}
	f.Add("a_.b", "a._b")
	f.Add("x.y__z", "x__y.z")
	f.Fuzz(func(t *testing.T, a, b string) {
		fa := FunctionName(a)
		if !FunctionNamePattern.MatchString(fa) || fa != FunctionName(a) {
			t.Fatalf("FunctionName(%q) = %q", a, fa)
		}
		if !tools.NamePattern.MatchString(a) || !tools.NamePattern.MatchString(b) || a == b {
			return
		}
		// A name that is its own function name and one that is not may
		// meet (up__echo, up.echo): the registry refuses that pair, as
		// TestFunctionNameCollisions checks. Two mapped names never do.
		fb := FunctionName(b)
		if fa != a && fb != b && fa == fb {
			t.Fatalf("%q and %q both map to %q", a, b, fa)
		}
	})
}
