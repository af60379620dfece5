package registry

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/diag"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// rawTool is a tool described by literal JSON.
type rawTool struct{ spec tools.Spec }

func (t rawTool) Spec() tools.Spec                                { return t.spec }
func (rawTool) Execute(context.Context, *tools.Call) (any, error) { return nil, nil }

func tool(name, params string) rawTool {
	return rawTool{tools.Spec{Name: name, Description: "A test tool.", Category: tools.Direct, Parameters: json.RawMessage(params)}}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name  string
		tools []tools.Tool
		opts  Options
		say   string
	}{
		{"duplicate", []tools.Tool{tool("a", `{"type":"object"}`), tool("a", `{"type":"object"}`)}, Options{}, `"a": registered twice`},
		{"reserved name", []tools.Tool{tool("changes", `{"type":"object"}`)}, Options{}, `"changes": the name is reserved`},
		{"bad name", []tools.Tool{tool("has space", `{"type":"object"}`)}, Options{}, "name must match"},
		{"invalid json", []tools.Tool{tool("x", `{"type":`)}, Options{}, `"x": parameters schema is not valid JSON`},
		{"invalid schema", []tools.Tool{tool("x", `{"type":"object","properties":{"a":{"type":"strin"}}}`)}, Options{}, `"x": parameters schema is invalid`},
		{"not an object", []tools.Tool{tool("x", `{"type":"string"}`)}, Options{}, `"type": "object"`},
		{"no loader: file ref", []tools.Tool{tool("x", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)}, Options{}, `"x": parameters schema is invalid`},
		{"no loader: http ref", []tools.Tool{tool("x", `{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/s.json"}}}`)}, Options{}, `"x"`},
		{"bad regexp", []tools.Tool{tool("x", `{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=a)b"}}}`)}, Options{}, `"x"`},
		{"example breaks schema", []tools.Tool{rawTool{tools.Spec{Name: "x", Description: "d", Category: tools.Direct,
			Parameters: json.RawMessage(`{"type":"object","required":["a"]}`), Examples: []tools.Example{{Arguments: json.RawMessage(`{}`)}}}}},
			Options{}, "example 1 does not fit"},
		{"unknown category", []tools.Tool{rawTool{tools.Spec{Name: "x", Description: "d", Category: "misc", Parameters: json.RawMessage(`{"type":"object"}`)}}}, Options{}, "unknown category"},
		{"no description", []tools.Tool{rawTool{tools.Spec{Name: "x", Category: tools.Direct, Parameters: json.RawMessage(`{"type":"object"}`)}}}, Options{}, "description is empty"},
		{"override unknown tool", []tools.Tool{tool("a", `{"type":"object"}`)}, Options{Overrides: map[string]Override{"b": {Description: "x"}}}, `"b": configured but not registered`},
		{"impossible limits", []tools.Tool{tool("a", `{"type":"object"}`)}, Options{Overrides: map[string]Override{"a": {Limits: tools.Limits{Timeout: time.Millisecond}}}}, "is above timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts, tt.tools...)
			if err == nil || !strings.Contains(err.Error(), tt.say) {
				t.Fatalf("error %v, want one saying %q", err, tt.say)
			}
		})
	}
}

func TestEveryProblemReported(t *testing.T) {
	_, err := New(Options{}, tool("a", `{`), tool("b", `{"type":"string"}`), tool("c", `{"type":"object"}`), tool("c", `{"type":"object"}`))
	for _, name := range []string{`"a"`, `"b"`, `"c"`} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}

func TestLimitsPrecedence(t *testing.T) {
	withOwn := rawTool{tools.Spec{Name: "own", Description: "d", Category: tools.SystemCommand, Parameters: json.RawMessage(`{"type":"object"}`),
		Limits: tools.Limits{MaxInFlight: 3}}}
	r, err := New(Options{
		Defaults:  map[tools.Category]tools.Limits{tools.SystemCommand: {MaxQueue: 7, MaxInFlight: 5}},
		Overrides: map[string]Override{"own": {Description: "overridden", Limits: tools.Limits{Timeout: 20 * time.Second}}},
	}, withOwn)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("own")
	want := tools.Limits{Timeout: 20 * time.Second, Target: time.Second, Max: 2 * time.Second, MaxInFlight: 3, MaxQueue: 7, QueueWait: 30 * time.Second,
		WaitTimeout: tools.DefaultWaitTimeout}
	if diff := cmp.Diff(want, e.Spec.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	if e.Spec.Description != "overridden" {
		t.Errorf("description override not applied")
	}
}

func TestValidateArgsPointers(t *testing.T) {
	r, err := New(Options{}, tool("x", `{"type":"object","additionalProperties":false,
		"properties":{"a":{"type":"object","required":["b"],"properties":{"b":{"type":"array","items":{"type":"integer"}}}},
		"c":{"enum":["x","y"]}, "d/e":{"type":"string"}}, "required":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("x")
	tests := []struct {
		args string
		want []string
	}{
		{`{}`, []string{"/a"}},
		{`{"a":{}}`, []string{"/a/b"}},
		{`{"a":{"b":[1,"two",3.5]}}`, []string{"/a/b/1", "/a/b/2"}},
		{`{"a":{"b":[]},"c":"z","zz":1}`, []string{"/c", "/zz"}},
		{`{"a":{"b":[]},"d/e":1}`, []string{"/d~1e"}},
		{`{"a":{"b":[]}}`, nil},
	}
	for _, tt := range tests {
		v, err := strictjson.Decode([]byte(tt.args), 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range e.ValidateArgs(v) {
			got = append(got, f.Pointer)
			if f.Message == "" {
				t.Errorf("%s: empty message at %s", tt.args, f.Pointer)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: pointers (-want +got):\n%s", tt.args, diff)
		}
	}
}

// TestOlderDraftHonoured: draft-04's boolean exclusiveMaximum means
// "maximum is exclusive"; under 2020-12 the same keyword must be a number.
func TestOlderDraftHonoured(t *testing.T) {
	schema := `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object",
		"properties":{"n":{"type":"integer","maximum":5,"exclusiveMaximum":true}}}`
	r, err := New(Options{}, tool("old", schema))
	if err != nil {
		t.Fatalf("draft-04 schema refused: %v", err)
	}
	e, _ := r.Lookup("old")
	v, _ := strictjson.Decode([]byte(`{"n":5}`), 0)
	if e.ValidateArgs(v) == nil {
		t.Errorf("draft-04 exclusiveMaximum not applied")
	}
	if _, err := New(Options{}, tool("new", strings.Replace(schema, `"$schema":"http://json-schema.org/draft-04/schema#",`, "", 1))); err == nil {
		t.Errorf("a boolean exclusiveMaximum passed as draft 2020-12")
	}
}

func TestExampleBuiltFromSchema(t *testing.T) {
	r, err := New(Options{}, tool("x", `{"type":"object","required":["path","n","mode","tags","when"],"properties":{
		"path":{"type":"string"},"n":{"type":"integer","minimum":3},"mode":{"enum":["fast","slow"]},
		"tags":{"type":"array","items":{"type":"string"},"minItems":2},"when":{"type":"string","format":"date-time"},
		"opt":{"type":"boolean"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("x")
	v, err := strictjson.Decode(e.Example(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if f := e.ValidateArgs(v); f != nil {
		t.Errorf("built example %s fails its schema: %v", e.Example(), f)
	}
}

func goldenRegistry(t *testing.T) *Registry {
	confirm := rawTool{tools.Spec{Name: "delete_everything", Description: "Deletes things.", Category: tools.SystemCommand,
		Instructions: "Only when the user asked for it.", Confirmation: tools.ConfirmToken, Containment: "namespaces",
		Parameters: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"what":{"type":"string","description":"What to delete.","default":"tmp"}}}`)}}
	weatherParams := `{"type":"object","properties":{"city":{"type":"string","description":"City name."}},"required":["city"],"additionalProperties":false}`
	weather := upstreamTool{rawTool{tools.Spec{Name: "weather", Description: "Current weather of a city, from an API.",
		Category: tools.ExternalAPI, Parameters: json.RawMessage(weatherParams), Fallback: []string{"weather_cache"}}}}
	cache := rawTool{tools.Spec{Name: "weather_cache", Description: "The last weather seen for a city.", Category: tools.Direct,
		Parameters: json.RawMessage(weatherParams)}}
	r, err := New(Options{}, diag.Echo(), diag.Sleep(), confirm, weather, cache)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// upstreamTool calls a remote service whose breaker is open.
type upstreamTool struct{ rawTool }

func (upstreamTool) Upstream() tools.Upstream {
	return tools.Upstream{Host: "api.example.com", Breaker: "open", RetryAfter: 12 * time.Second}
}

// TestRenderGolden holds every discovery rendering to a golden file;
// go test ./internal/registry -update rewrites them after a deliberate change.
func TestRenderGolden(t *testing.T) {
	r := goldenRegistry(t)
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			got, err := Render(f, r.Entries())
			if err != nil {
				t.Fatal(err)
			}
			ext := ".json"
			if f == Prompt {
				ext = ".md"
			}
			path := filepath.Join("testdata", "list_"+string(f)+ext)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s rendering changed (-golden +got); rerun with -update if intended:\n%s", f, diff)
			}
		})
	}
}

func TestRenderShapes(t *testing.T) {
	r := goldenRegistry(t)
	var openai []struct {
		Type     string
		Function struct {
			Name       string
			Parameters map[string]any
		}
	}
	b, _ := Render(OpenAI, r.Entries())
	if err := json.Unmarshal(b, &openai); err != nil || len(openai) != 5 || openai[0].Type != "function" {
		t.Fatalf("openai listing: %v %s", err, b)
	}
	for _, it := range openai {
		if _, has := it.Function.Parameters["$schema"]; has {
			t.Errorf("openai parameters keep $schema for %s", it.Function.Name)
		}
	}
	var mcp struct {
		Tools []map[string]any `json:"tools"`
	}
	b, _ = Render(MCP, r.Entries())
	if err := json.Unmarshal(b, &mcp); err != nil || len(mcp.Tools) != 5 || mcp.Tools[0]["inputSchema"] == nil {
		t.Fatalf("mcp listing: %v %s", err, b)
	}
}

func withFallback(t rawTool, fb ...string) rawTool {
	t.spec.Fallback = fb
	return t
}

// TestFallbacksChecked: a fallback that could not work is refused at start,
// naming the tool, the fallback and why; a chain that can work is kept.
func TestFallbacksChecked(t *testing.T) {
	obj := `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q"]}`
	confirmed := tool("confirmed", obj)
	confirmed.spec.Confirmation = tools.ConfirmToken
	tests := []struct {
		name  string
		tools []tools.Tool
		say   string
	}{
		{"unknown", []tools.Tool{withFallback(tool("a", obj), "b")}, `"a": fallback "b": no such tool`},
		{"itself", []tools.Tool{withFallback(tool("a", obj), "a")}, `"a": fallback "a": a tool cannot be its own fallback`},
		{"needs confirmation", []tools.Tool{withFallback(tool("a", obj), "confirmed"), confirmed}, "requires confirmation"},
		{"requires more", []tools.Tool{withFallback(tool("a", obj), "b"),
			tool("b", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q","n"]}`)}, `requires "n"`},
		{"refuses a parameter", []tools.Tool{withFallback(tool("a", obj), "b"),
			tool("b", `{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}`)}, `does not take "n"`},
		{"other type", []tools.Tool{withFallback(tool("a", obj), "b"),
			tool("b", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"string"}}}`)}, `"n" is integer there, string here`},
		{"example fails", []tools.Tool{withFallback(tool("a", obj), "b"),
			tool("b", `{"type":"object","properties":{"q":{"type":"string","maxLength":1}}}`)}, "the example call"},
		{"cycle of two", []tools.Tool{withFallback(tool("a", obj), "b"), withFallback(tool("b", obj), "a")}, "cycle: a -> b -> a"},
		{"cycle of three", []tools.Tool{withFallback(tool("a", obj), "b"), withFallback(tool("b", obj), "c"),
			withFallback(tool("c", obj), "a")}, "cycle: a -> b -> c -> a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{}, tt.tools...)
			if err == nil || !strings.Contains(err.Error(), tt.say) {
				t.Fatalf("error %v, want one saying %q", err, tt.say)
			}
		})
	}
	wider := `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"number"},"extra":{"type":"boolean"}}}`
	r, err := New(Options{Overrides: map[string]Override{"a": {Fallback: []string{"b", "c"}}}},
		tool("a", obj), withFallback(tool("b", wider), "c"), tool("c", wider))
	if err != nil {
		t.Fatalf("a chain that works was refused: %v", err)
	}
	if e, _ := r.Lookup("a"); !slices.Equal(e.Spec.Fallback, []string{"b", "c"}) || !slices.Equal(e.Item().Fallback, []string{"b", "c"}) {
		t.Errorf("the override's fallbacks are not the tool's: %v", e.Spec.Fallback)
	}
}
