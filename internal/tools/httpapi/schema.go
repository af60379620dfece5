package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toold/toold/internal/suggest"
	"github.com/toold/toold/internal/tools"
)

// schemaInfo is what building requests needs from a parameters schema:
// the top-level properties with their declared types, which are required,
// and their defaults.
type schemaInfo struct {
	raw      json.RawMessage
	types    map[string][]string
	required []string
	defaults map[string]any
}

var emptyParameters = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

func readSchema(params map[string]any) (*schemaInfo, error) {
	si := &schemaInfo{raw: emptyParameters, types: map[string][]string{}}
	if params != nil {
		var err error
		if si.raw, err = json.Marshal(params); err != nil {
			return nil, err
		}
	}
	var s struct {
		Type       any      `json:"type"`
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(si.raw, &s); err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, errors.New(`the schema must say "type": "object"`)
	}
	si.required = s.Required
	for name, p := range s.Properties {
		switch t := p.Type.(type) {
		case string:
			si.types[name] = []string{t}
		case []any:
			for _, x := range t {
				if str, ok := x.(string); ok {
					si.types[name] = append(si.types[name], str)
				}
			}
		default:
			si.types[name] = nil // any type
		}
	}
	var err error
	if si.defaults, err = tools.SchemaDefaults(si.raw); err != nil {
		return nil, err
	}
	return si, nil
}

// check refuses placeholders that name no parameter, path placeholders a
// call could leave out, and lists or objects where only text can go.
func (si *schemaInfo) check(r *request) error {
	known := slices.Sorted(maps.Keys(si.types))
	unknown := func(where, name string) error {
		msg := fmt.Sprintf("%s: {%s} is not a parameter", where, name)
		if near := suggest.Closest(name, known, 2); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return errors.New(msg + "; parameters: " + strings.Join(known, ", "))
	}
	scalarOnly := func(where, name string) error {
		for _, t := range si.types[name] {
			if t == "array" || t == "object" {
				return fmt.Errorf("%s: {%s} is declared %s, which cannot go there", where, name, t)
			}
		}
		return nil
	}
	for _, name := range r.url.names() {
		if _, ok := si.types[name]; !ok {
			return unknown("request.url", name)
		}
		_, hasDefault := si.defaults[name]
		if !slices.Contains(si.required, name) && !hasDefault {
			return fmt.Errorf("request.url: {%s} is in the path, so the parameter must be required or have a default", name)
		}
		if err := scalarOnly("request.url", name); err != nil {
			return err
		}
	}
	for _, groups := range []struct {
		where string
		items []named
	}{{"request.query", r.query}, {"request.headers", r.headers}} {
		for _, n := range groups.items {
			for _, name := range n.value.names() {
				if _, ok := si.types[name]; !ok {
					return unknown(groups.where+"."+n.name, name)
				}
				if _, whole := n.value.whole(); (!whole || groups.where == "request.headers") && scalarOnly("", name) != nil {
					return scalarOnly(groups.where+"."+n.name, name)
				}
			}
		}
	}
	if r.body != nil {
		for _, name := range r.body.names() {
			if _, ok := si.types[name]; !ok {
				return unknown("request.body", name)
			}
		}
	}
	return nil
}
