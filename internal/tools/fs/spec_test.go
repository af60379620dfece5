package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func TestToolsAndSpecs(t *testing.T) {
	tw := newTestWS(t, Options{})
	var names, ro []string
	for _, tl := range tw.w.Tools() {
		names = append(names, tl.Spec().Name)
	}
	for _, tl := range tw.w.ReadOnlyTools() {
		ro = append(ro, tl.Spec().Name)
	}
	if diff := cmp.Diff([]string{"read_file", "list_files", "grep", "write_file", "edit_file"}, names); diff != "" {
		t.Errorf("Tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"read_file", "list_files", "grep"}, ro); diff != "" {
		t.Errorf("ReadOnlyTools (-want +got):\n%s", diff)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for _, tl := range tw.w.Tools() {
		s := tl.Spec()
		t.Run(s.Name, func(t *testing.T) {
			if !tools.NamePattern.MatchString(s.Name) || s.Category != tools.Direct {
				t.Errorf("name %q / category %q", s.Name, s.Category)
			}
			if s.Description == "" || s.Instructions == "" || s.Returns == "" || len(s.Examples) == 0 || s.Output == nil {
				t.Errorf("spec is incomplete: %+v", s)
			}
			var params struct {
				Properties map[string]map[string]any `json:"properties"`
			}
			if err := json.Unmarshal(s.Parameters, &params); err != nil {
				t.Fatal(err)
			}
			for name, p := range params.Properties {
				if p["description"] == nil || !snake.MatchString(name) {
					t.Errorf("parameter %q: no description or not snake_case", name)
				}
			}
			checkSnake(t, snake, s.Output)
			for _, ex := range s.Examples {
				var v any
				if err := json.Unmarshal(ex.Arguments, &v); err != nil {
					t.Fatal(err)
				}
				if err := validate(s.Parameters, v); err != nil {
					t.Errorf("example %q does not validate: %v", ex.Description, err)
				}
			}
		})
	}
}

// checkSnake walks a schema and checks every property name.
func checkSnake(t *testing.T, snake *regexp.Regexp, schema json.RawMessage) {
	t.Helper()
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name := range props {
					if !snake.MatchString(name) {
						t.Errorf("output field %q is not snake_case", name)
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		t.Fatal(err)
	}
	walk(v)
}

func TestNewRefusesNonDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(dir, "missing")} {
		if w, err := New(p, Options{}); err == nil {
			w.Close()
			t.Errorf("New(%q) succeeded", p)
		}
	}
}

func TestSchemaDefaults(t *testing.T) {
	tw := newTestWS(t, Options{})
	var params struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(tw.tool(t, "read_file").Spec().Parameters, &params); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"paths"}, params.Required); diff != "" {
		t.Errorf("read_file required (-want +got):\n%s", diff)
	}
	if params.Properties["offset"].Default != float64(1) {
		t.Errorf("offset default = %v", params.Properties["offset"].Default)
	}
}
