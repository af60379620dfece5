package registry

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// portableCases are schemas outside the portable subset, what Portable
// makes of them, and instances both must judge alike.
var portableCases = []struct {
	name, schema, want string
}{
	{"nullable array", `{"type":["array","null"],"items":{"type":"string"}}`,
		`{"items":{"type":"string"},"anyOf":[{"type":"array"},{"type":"null"}]}`},
	{"one type in a list", `{"type":["string"],"minLength":2}`, `{"type":"string","minLength":2}`},
	{"a union beside an anyOf", `{"type":["string","integer"],"anyOf":[{"minLength":3},{"minimum":5}]}`,
		`{"allOf":[{"anyOf":[{"minLength":3},{"minimum":5}]},{"anyOf":[{"type":"string"},{"type":"integer"}]}]}`},
	{"empty property, order kept", `{"type":"object","properties":{"b":{"description":"any value"},"a":{"type":"string"}},"additionalProperties":{}}`,
		`{"type":"object","properties":{"b":{"description":"any value","anyOf":[{"type":"string"},{"type":"number"},{"type":"boolean"},{"type":"object"},{"type":"array"},{"type":"null"}]},"a":{"type":"string"}},"additionalProperties":true}`},
	{"bare booleans", `{"type":"object","properties":{"yes":true,"no":false},"additionalProperties":false}`,
		`{"type":"object","properties":{"yes":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"boolean"},{"type":"object"},{"type":"array"},{"type":"null"}]},"no":{"not":{}}},"additionalProperties":false}`},
	{"deep in items and defs", `{"type":"object","properties":{"l":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"type":["integer","null"],"minimum":1}}}`,
		`{"type":"object","properties":{"l":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"minimum":1,"anyOf":[{"type":"integer"},{"type":"null"}]}}}`},
	{"not {} stays", `{"not":{}}`, `{"not":{}}`},
	{"already portable, byte for byte", `{"type": "object",  "properties": {"z": {"type": "string"}}}`, `{"type": "object",  "properties": {"z": {"type": "string"}}}`},
}

// portableInstances are judged by each schema before and after.
var portableInstances = []string{`null`, `true`, `0`, `1`, `7`, `2.5`, `"a"`, `"abcd"`, `[]`, `["x"]`, `[1]`, `[null]`,
	`{}`, `{"a":"x"}`, `{"a":1}`, `{"b":null,"a":"y"}`, `{"yes":1}`, `{"no":1}`, `{"l":[1,2]}`, `{"l":[0]}`, `{"l":[null]}`, `{"z":"q"}`}

// TestPortable: each rewrite gives the portable form, which breaks none of
// the rules and accepts exactly what the original accepts.
func TestPortable(t *testing.T) {
	for _, tc := range portableCases {
		t.Run(tc.name, func(t *testing.T) {
			if len(PortabilityProblems(json.RawMessage(tc.schema))) == 0 && tc.schema != tc.want {
				t.Fatalf("the checker finds nothing to rewrite in %s", tc.schema)
			}
			got := Portable(json.RawMessage(tc.schema))
			if string(got) != tc.want {
				t.Fatalf("Portable:\n got %s\nwant %s", got, tc.want)
			}
			if p := PortabilityProblems(got); len(p) > 0 {
				t.Errorf("the portable form still has problems: %v", p)
			}
			sameVerdicts(t, json.RawMessage(tc.schema), got)
		})
	}
}

// TestPortabilityProblems: the checker names each rule a schema breaks.
func TestPortabilityProblems(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":["string","null"]}`:                       "type is a list",
		`{"type":"object","properties":{"x":{}}}`:          "/properties/x: the schema constrains nothing",
		`{"type":"array","items":true}`:                    "/items: a bare true",
		`{"$ref":"https://example.com/s.json"}`:            "points outside the schema",
		`{"description":"only words"}`:                     "(top): the schema constrains nothing",
		`{"type":"object","additionalProperties":true}`:    "",
		`{"type":"object","dependencies":{"a":["b"]}}`:     "",
		`{"anyOf":[{"type":"string"},{"type":"integer"}]}`: "",
	} {
		got := strings.Join(PortabilityProblems(json.RawMessage(schema)), "; ")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want %q", schema, got, want)
		}
	}
}

func sameVerdicts(t *testing.T, before, after json.RawMessage) {
	t.Helper()
	a, errA := tools.CompileSchema("t", "s", before)
	b, errB := tools.CompileSchema("t", "s", after)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("compiles before: %v, after: %v (%s)", errA, errB, after)
	}
	if errA != nil {
		return
	}
	for _, in := range portableInstances {
		v, err := strictjson.Decode([]byte(in), 0)
		if err != nil {
			t.Fatal(err)
		}
		if okA, okB := a.Validate(v) == nil, b.Validate(v) == nil; okA != okB {
			t.Errorf("%s: accepted before %v, after %v\nbefore %s\nafter  %s", in, okA, okB, before, after)
		}
	}
}

// FuzzPortable: whatever schema a tool (or an upstream server) declares,
// the portable form is JSON, compiles when the original does, breaks no
// rule the original did not make it break, and judges the instances as
// the original does.
func FuzzPortable(f *testing.F) {
	for _, tc := range portableCases {
		f.Add(tc.schema)
	}
	f.Add(`{"type":"object","properties":{"a":{"oneOf":[true,{"type":["number","string"]}]}},"patternProperties":{"^x":{}}}`)
	f.Add(`{"items":[{},{"type":["null","boolean"]}],"if":{"type":"string"},"then":{"minLength":1}}`)
	f.Fuzz(func(t *testing.T, schema string) {
		got := Portable(json.RawMessage(schema))
		if !json.Valid(got) && json.Valid([]byte(schema)) {
			t.Fatalf("Portable(%s) = %s, not JSON", schema, got)
		}
		if _, err := tools.CompileSchema("t", "s", json.RawMessage(schema)); err != nil {
			return
		}
		if string(got) != schema {
			if p := PortabilityProblems(got); len(p) > 0 && !strings.Contains(strings.Join(p, ";"), "outside the schema") {
				t.Errorf("Portable(%s) = %s, still %v", schema, got, p)
			}
		}
		sameVerdicts(t, json.RawMessage(schema), got)
	})
}
