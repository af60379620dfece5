package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// FuzzElicitSchema: whatever schema a caller gave request_user_input, the
// form the client is asked to fill is a JSON object schema, and a wrapped
// one asks for the answer field.
func FuzzElicitSchema(f *testing.F) {
	for _, s := range []string{``, `{"type":"integer"}`, `{"type":"object","properties":{"name":{"type":"string"}}}`,
		`{"type":"object","properties":{"tags":{"type":"array"}}}`, `true`, `{"type":"object","properties":{}}`, `[]`} {
		f.Add(s, "")
		f.Add(s, "yes")
	}
	f.Fuzz(func(t *testing.T, schema, choice string) {
		in := tools.InputRequest{Prompt: "?"}
		if schema != "" {
			if !json.Valid([]byte(schema)) {
				return // arguments are decoded before a tool sees them
			}
			in.Schema = json.RawMessage(schema)
		}
		if choice != "" {
			in.Choices = []string{choice}
		}
		out, wrapped := elicitSchema(in)
		var form struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(out, &form); err != nil || form.Type != "object" || len(form.Properties) == 0 {
			t.Fatalf("%q %q: the form %s is not an object schema (%v)", schema, choice, out, err)
		}
		if _, ok := form.Properties["answer"]; wrapped && !ok {
			t.Errorf("%q: wrapped without an answer field: %s", schema, out)
		}
	})
}
