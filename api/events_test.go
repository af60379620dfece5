package api_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/events"
)

// eventTypes reads the event types from the events package's source: every
// exported string constant named Type*. A type added there is held to the
// contract here without anyone listing it.
func eventTypes(t *testing.T) map[string]string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), "../internal/events", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{} // value -> constant
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Type") || !name.IsExported() || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							t.Fatalf("events.%s is not a string literal; teach this test to read it", name.Name)
						}
						v, _ := strconv.Unquote(lit.Value)
						types[v] = name.Name
					}
				}
			}
		}
	}
	if len(types) == 0 {
		t.Fatal("found no events.Type* constants")
	}
	return types
}

// Every event type the code has is one ActivityEvent.type allows, and the
// enum allows no type the code does not have; and an event of each type,
// as it is marshalled, with the fields that type carries, fits the schema.
func TestActivityEventTypes(t *testing.T) {
	types := eventTypes(t)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	schema, ok := doc.Components.Schemas["ActivityEvent"]
	if !ok || schema.Value.Properties["type"] == nil {
		t.Fatal("api/openapi.yaml has no ActivityEvent.type")
	}
	var enum []string
	for _, v := range schema.Value.Properties["type"].Value.Enum {
		enum = append(enum, v.(string))
	}
	for v, name := range types {
		if !slices.Contains(enum, v) {
			t.Errorf("events.%s (%q) is not in ActivityEvent.type's enum %v", name, v, enum)
		}
	}
	for _, v := range enum {
		if _, ok := types[v]; !ok {
			t.Errorf("ActivityEvent.type's enum has %q, which no events.Type* constant is", v)
		}
	}

	// What each type carries besides the fields every event has (as the
	// recorder and the executions service fill them in).
	extra := map[string]events.Event{
		events.TypePending: {Status: "pending"},
		events.TypeEnd:     {Status: "success", DurationMS: 12.5},
		events.TypeError:   {Status: "timeout", ErrorType: "timeout_error", ErrorCode: "deadline", DurationMS: 30000},
		events.TypeOutput:  {Stream: "stdout", Chunk: "line\n"},
		events.TypeWaiting: {Status: "waiting"},
		events.TypeResumed: {Status: "pending"},
	}
	for v := range types {
		ev := extra[v]
		ev.ID, ev.Type, ev.Time, ev.Replica = "42.0", v, time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "toold-0"
		ev.RequestID, ev.Tool, ev.Caller, ev.ExecutionID = "req-1", "echo", "agent", "01JEXEC"
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		apitest.CheckSchema(t, "ActivityEvent", data)
	}
}
