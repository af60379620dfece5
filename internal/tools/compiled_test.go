package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/strictjson"
)

// TestCompileSchemaRefuses: a schema that is missing, not JSON, invalid,
// or reaches outside itself with $ref does not compile, and the error
// names which of the tool's schemas it is.
func TestCompileSchemaRefuses(t *testing.T) {
	for _, tc := range []struct{ name, raw, want string }{
		{"missing", ``, "answer schema is missing"},
		{"not JSON", `{"type":`, "answer schema is not valid JSON"},
		{"duplicate key", `{"type":"object","type":"string"}`, "answer schema is not valid JSON"},
		{"invalid", `{"type":"nothing"}`, "answer schema is invalid"},
		{"file ref", `{"$ref":"file:///etc/passwd"}`, "answer schema is invalid"},
		{"http ref", `{"$ref":"http://127.0.0.1:1/s.json"}`, "answer schema is invalid"},
	} {
		if _, err := CompileSchema("ask", "answer", json.RawMessage(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestSchemaValidate: every failing field at its own pointer, sorted; a
// missing or unknown property at the property, not its object.
func TestSchemaValidate(t *testing.T) {
	s, err := CompileSchema("t", "parameters", json.RawMessage(`{"type":"object","additionalProperties":false,
		"required":["n","list"],"properties":{"n":{"type":"integer","minimum":1},
		"list":{"type":"array","items":{"type":"object","required":["a/b"]}},"$ref":{"$ref":"#/properties/n"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	valid, _ := strictjson.Decode([]byte(`{"n":2,"list":[{"a/b":1}],"$ref":3}`), 0)
	if fe := s.Validate(valid); fe != nil {
		t.Errorf("valid: %+v", fe)
	}
	bad, _ := strictjson.Decode([]byte(`{"n":"2","list":[{}],"x~":1,"$ref":0}`), 0)
	want := []FieldError{
		{Pointer: "/$ref", Message: "minimum: got 0, want 1"},
		{Pointer: "/list/0/a~1b", Message: "is required"},
		{Pointer: "/n", Message: "must be integer, not string"},
		{Pointer: "/x~0", Message: UnknownParameter},
	}
	if diff := cmp.Diff(want, s.Validate(bad)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s.Compiled().Properties["n"] == nil {
		t.Error("the compiled form lacks a property")
	}
}
