package search

import (
	"encoding/json"
	"maps"
	"slices"
)

// maxParams bounds the parameters read from one schema: a tool's search
// terms are its name and purpose, not an enormous input.
const maxParams = 64

// ParamsFromSchema reads the parameters of a JSON Schema for search: the
// top-level properties (and those of object properties one level down),
// with their descriptions and string enum values. A schema it cannot read
// has none.
func ParamsFromSchema(raw json.RawMessage) []Param {
	var s schema
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var out []Param
	s.collect(&out, 2)
	return out
}

type schema struct {
	Description string             `json:"description"`
	Enum        []any              `json:"enum"`
	Properties  map[string]*schema `json:"properties"`
	Items       *schema            `json:"items"`
}

func (s *schema) collect(out *[]Param, depth int) {
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[name]
		if p == nil || len(*out) >= maxParams {
			continue
		}
		*out = append(*out, Param{Name: name, Description: p.Description, Enum: p.enums()})
		if depth > 1 {
			p.collect(out, depth-1)
			if p.Items != nil {
				p.Items.collect(out, depth-1)
			}
		}
	}
}

func (s *schema) enums() []string {
	src := s.Enum
	if len(src) == 0 && s.Items != nil {
		src = s.Items.Enum
	}
	var out []string
	for _, v := range src {
		if str, ok := v.(string); ok {
			out = append(out, str)
		}
	}
	return out
}
