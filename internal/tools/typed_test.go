package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

type inner struct {
	Name string `json:"name" validate:"min=2"`
}

type params struct {
	Path    string            `json:"path" desc:"Where." validate:"min=1,max=100"`
	Mode    string            `json:"mode,omitempty" default:"fast" validate:"omitempty,oneof=fast slow"`
	Count   int               `json:"count,omitempty" default:"3" validate:"omitempty,gte=1,lte=10"`
	Tags    []string          `json:"tags,omitempty" validate:"max=5,dive,min=1"`
	Hash    string            `json:"hash,omitempty" validate:"omitempty,hexadecimal"`
	When    *time.Time        `json:"when,omitempty"`
	Items   []inner           `json:"items,omitempty" validate:"dive"`
	Labels  map[string]string `json:"labels,omitempty"`
	A       string            `json:"a,omitempty" validate:"required_without=B"`
	B       string            `json:"b,omitempty"`
	private int
}

type result struct {
	Lines []string `json:"lines"`
	Next  *int     `json:"next"`
}

func TestSchemaFor(t *testing.T) {
	raw, err := tools.SchemaFor(reflect.TypeFor[params](), false)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(raw, &got)
	props := got["properties"].(map[string]any)
	want := map[string]any{
		"path":  map[string]any{"type": "string", "description": "Where.", "minLength": 1.0, "maxLength": 100.0},
		"mode":  map[string]any{"type": "string", "default": "fast", "enum": []any{"fast", "slow"}},
		"count": map[string]any{"type": "integer", "default": 3.0, "minimum": 1.0, "maximum": 10.0},
		"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "minLength": 1.0}, "maxItems": 5.0},
		"hash":  map[string]any{"type": "string", "pattern": "^(0[xX])?[0-9a-fA-F]+$"},
		"when":  map[string]any{"type": "string", "format": "date-time"},
	}
	for k, w := range want {
		if diff := cmp.Diff(w, props[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	if diff := cmp.Diff([]any{"path"}, got["required"]); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if got["additionalProperties"] != false || props["private"] != nil {
		t.Errorf("schema %s", raw)
	}
	out, _ := tools.SchemaFor(reflect.TypeFor[result](), true)
	if want := `{"type":"object","properties":{"lines":{"type":["array","null"],"items":{"type":"string"}},"next":{"type":["integer","null"]}},"required":["lines"],"additionalProperties":false}`; string(out) != want {
		t.Errorf("output schema\n got %s\nwant %s", out, want)
	}
}

func TestSchemaForRefusesRecursion(t *testing.T) {
	type node struct {
		Kids []node `json:"kids"`
	}
	if _, err := tools.SchemaFor(reflect.TypeFor[node](), false); err == nil {
		t.Fatal("a recursive type was described")
	}
}

func TestTyped(t *testing.T) {
	var seen params
	tool := tools.Typed(tools.Spec{Name: "t", Description: "d", Category: tools.Direct},
		func(_ context.Context, _ *tools.Call, in params) (result, error) {
			seen = in
			return result{Lines: []string{in.Path}}, nil
		})
	if tool.Spec().Output == nil || tool.Spec().Parameters == nil {
		t.Fatal("schemas not derived")
	}
	tests := []struct {
		args     string
		pointers []string
	}{
		{`{"path":"x","a":"1"}`, nil},
		{`{"path":"x"}`, []string{"/a"}}, // required_without: only the validator can say it
		{`{"path":"x","a":"1","items":[{"name":"ok"},{"name":"y"}]}`, []string{"/items/1/name"}},
	}
	for _, tt := range tests {
		_, err := tool.Execute(context.Background(), tools.NewCall(json.RawMessage(tt.args), "r", "c", nil))
		var got []string
		if te, ok := tools.AsError(err); ok {
			for _, f := range te.Fields {
				got = append(got, f.Pointer)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.pointers, got); diff != "" {
			t.Errorf("%s: pointers (-want +got):\n%s", tt.args, diff)
		}
	}
	if _, err := tool.Execute(context.Background(), tools.NewCall(json.RawMessage(`{"path":"x","a":"1"}`), "r", "c", nil)); err != nil {
		t.Fatal(err)
	}
	if seen.Mode != "fast" || seen.Count != 3 {
		t.Errorf("defaults not applied: mode %q count %d", seen.Mode, seen.Count)
	}
	if _, err := tool.Execute(context.Background(), tools.NewCall(json.RawMessage(`{"path":"x","a":"1","count":7}`), "r", "c", nil)); err != nil || seen.Count != 7 {
		t.Errorf("a given value was replaced by the default: %d %v", seen.Count, err)
	}
}

// ExampleTyped shows a tool written against Go types: the schema comes from
// the input struct, and the pipeline validates against it before the
// function runs.
func ExampleTyped() {
	type in struct {
		Name string `json:"name" desc:"Who to greet." validate:"min=1,max=64"`
	}
	type out struct {
		Greeting string `json:"greeting"`
	}
	greet := tools.Typed(tools.Spec{Name: "greet", Description: "Greets someone.", Category: tools.Direct},
		func(_ context.Context, _ *tools.Call, in in) (out, error) {
			return out{Greeting: "Hello, " + in.Name}, nil
		})
	fmt.Println(string(greet.Spec().Parameters))
	r, _ := greet.Execute(context.Background(), tools.NewCall(json.RawMessage(`{"name":"Ada"}`), "req-1", "me", nil))
	fmt.Println(r.(out).Greeting)
	// Output:
	// {"type":"object","properties":{"name":{"type":"string","description":"Who to greet.","minLength":1,"maxLength":64}},"required":["name"],"additionalProperties":false}
	// Hello, Ada
}
