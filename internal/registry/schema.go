package registry

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toold/toold/internal/suggest"
	"github.com/toold/toold/internal/tools"
)

// ValidateArgs validates decoded arguments; it returns every failing field
// as a JSON pointer with a message, or nil when the arguments are valid. An
// unknown top-level parameter close to a known one names it: a model that
// wrote "path" for "paths" is told so.
func (e *Entry) ValidateArgs(v any) []tools.FieldError {
	fields := e.params.Validate(v)
	for i, f := range fields {
		name, top := strings.CutPrefix(f.Pointer, "/")
		if !top || strings.Contains(name, "/") || f.Message != tools.UnknownParameter {
			continue
		}
		if near := closest(name, e.params.Compiled().Properties); near != "" {
			fields[i].Message += fmt.Sprintf(" (did you mean %q?)", near)
		}
	}
	return fields
}

// ValidateOutput validates a decoded result against the output schema, if
// the tool declares one.
func (e *Entry) ValidateOutput(v any) []tools.FieldError {
	if e.output == nil {
		return nil
	}
	return e.output.Validate(v)
}

// closest returns the known name within two edits of name, if any.
func closest(name string, known map[string]*jsonschema.Schema) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	return suggest.Closest(name, names, 2)
}

// buildExample returns the tool's first example, or arguments built from the
// schema: every required property with its default, example, enum value or a
// placeholder of its type.
func buildExample(spec tools.Spec, s *jsonschema.Schema) json.RawMessage {
	if len(spec.Examples) > 0 {
		return spec.Examples[0].Arguments
	}
	b, err := json.Marshal(sample(s, 0))
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

func sample(s *jsonschema.Schema, depth int) any {
	for s.Ref != nil && depth < 8 {
		s, depth = s.Ref, depth+1
	}
	switch {
	case depth > 8:
		return nil
	case s.Default != nil:
		return *s.Default
	case len(s.Examples) > 0:
		return s.Examples[0]
	case s.Const != nil:
		return *s.Const
	case s.Enum != nil && len(s.Enum.Values) > 0:
		return s.Enum.Values[0]
	case len(s.OneOf) > 0:
		return sample(s.OneOf[0], depth+1)
	case len(s.AnyOf) > 0:
		return sample(s.AnyOf[0], depth+1)
	}
	types := []string{}
	if s.Types != nil {
		types = s.Types.ToStrings()
	}
	typ := "object"
	if len(types) > 0 {
		typ = types[0]
	}
	switch typ {
	case "string":
		return sampleString(s)
	case "integer", "number":
		return sampleNumber(s, typ)
	case "boolean":
		return true
	case "null":
		return nil
	case "array":
		return sampleArray(s, depth)
	}
	obj := map[string]any{}
	for _, name := range s.Required {
		if p, ok := s.Properties[name]; ok {
			obj[name] = sample(p, depth+1)
		} else {
			obj[name] = "..."
		}
	}
	return obj
}

func sampleString(s *jsonschema.Schema) string {
	if s.Format != nil {
		switch s.Format.Name {
		case "date-time":
			return "2026-01-01T00:00:00Z"
		case "date":
			return "2026-01-01"
		case "email":
			return "user@example.com"
		case "uri", "url":
			return "https://example.com/"
		case "uuid":
			return "00000000-0000-4000-8000-000000000000"
		}
	}
	v := "text"
	if s.MinLength != nil && *s.MinLength > len(v) {
		v = strings.Repeat("x", *s.MinLength)
	}
	return v
}

func sampleNumber(s *jsonschema.Schema, typ string) any {
	n := big.NewRat(1, 1)
	if s.Minimum != nil && s.Minimum.Cmp(n) > 0 {
		n = s.Minimum
	}
	if s.Maximum != nil && s.Maximum.Cmp(n) < 0 {
		n = s.Maximum
	}
	if typ == "integer" && n.IsInt() {
		return json.Number(n.Num().String())
	}
	f, _ := n.Float64()
	return f
}

func sampleArray(s *jsonschema.Schema, depth int) []any {
	var item *jsonschema.Schema
	if it, ok := s.Items.(*jsonschema.Schema); ok {
		item = it
	} else if s.Items2020 != nil {
		item = s.Items2020
	}
	n := 1
	if s.MinItems != nil && *s.MinItems > n && *s.MinItems <= 16 {
		n = *s.MinItems
	}
	out := make([]any, 0, n)
	for range n {
		if item == nil {
			out = append(out, "...")
		} else {
			out = append(out, sample(item, depth+1))
		}
	}
	return out
}
