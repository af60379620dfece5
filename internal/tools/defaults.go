package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SchemaDefaults collects the "default" of each top-level property of a
// parameters schema, for tools that fill absent arguments before using
// them (declarative command and HTTP tools). Numbers are kept as written
// (json.Number); a null default is no default.
func SchemaDefaults(schema []byte) (map[string]any, error) {
	var s struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for name, p := range s.Properties {
		if p.Default == nil {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(p.Default))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("properties.%s.default: %w", name, err)
		}
		if v != nil {
			out[name] = v
		}
	}
	return out, nil
}

// ApplyDefaults sets each default in args whose key args lacks.
func ApplyDefaults(args, defaults map[string]any) {
	for k, v := range defaults {
		if _, ok := args[k]; !ok {
			args[k] = v
		}
	}
}
