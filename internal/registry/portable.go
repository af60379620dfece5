package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Portable schemas. A tool's schemas reach model providers and MCP hosts
// that read less of JSON Schema than the validator does: Gemini's function
// declarations take an OpenAPI subset with one type per schema, and the
// MCP Inspector's --strict check (which hosts' authors run) flags a list
// of types, an empty schema and a bare true. So the registry rewrites each
// schema, once when the tool is registered, into a form that says the same
// thing in the portable subset (docs/examples.md, "Schemas every provider
// accepts"); validation, every rendering and search all read that form.
//
// Each rewrite keeps the schema's meaning exactly:
//
//   - "type": [A, B] becomes "anyOf": [{"type": A}, {"type": B}] (the
//     siblings stay where they were: they constrain only values of their
//     own type); with an anyOf already there, both go under an allOf;
//   - a schema that constrains nothing ({}, or one with annotations only,
//     or a bare true) becomes "anyOf" of the six types — any JSON value —
//     keeping its annotations; where a bare boolean is allowed
//     (additionalProperties and its kin) it becomes true instead;
//   - a bare false becomes {"not": {}}.
//
// A schema it cannot read (not JSON, too deep) is returned as it was.

// anyType is every JSON value, one type per branch.
var anyType = []any{map[string]any{"type": "string"}, map[string]any{"type": "number"},
	map[string]any{"type": "boolean"}, map[string]any{"type": "object"}, map[string]any{"type": "array"},
	map[string]any{"type": "null"}}

// maxPortableDepth bounds the rewrite of a schema (an upstream server's is
// untrusted input).
const maxPortableDepth = 64

var (
	// schemaMaps hold subschemas by name.
	schemaMaps = []string{"properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
	// schemaLists hold subschemas in arrays.
	schemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	// schemaOne hold one subschema (items: one, or a list in older drafts).
	schemaOne = []string{"items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
		"unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema"}
	// booleanValued may hold a bare true or false portably.
	booleanValued = []string{"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
	// constraining are the keywords that constrain an instance (an "if"
	// only with its "then" or "else").
	constraining = []string{"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
		"exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding",
		"contentSchema", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties",
		"minProperties", "required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems",
		"contains", "additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
		"unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
		"$recursiveRef"}
)

// Portable rewrites a schema into the portable subset (see above). A
// schema already in it is returned as it was, byte for byte; a rewritten
// one keeps its members in their order (listings and prompts show
// properties as the schema declares them).
func Portable(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || len(PortabilityProblems(raw)) == 0 {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // numbers kept as written
	v, err := readOrdered(d, 0)
	if err != nil {
		return raw
	}
	out, ok := portable(v, "", 0)
	if !ok {
		return raw
	}
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}

// object is a JSON object that keeps its members' order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) { v, ok := o.vals[k]; return v, ok }

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; ok {
		delete(o.vals, k)
		o.keys = slices.DeleteFunc(o.keys, func(x string) bool { return x == k })
	}
}

// MarshalJSON writes the members in order, without HTML escaping.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeJSON(&b, k); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := writeJSON(&b, o.vals[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// readOrdered reads one JSON value, objects as *object, within the depth
// bound.
func readOrdered(d *json.Decoder, depth int) (any, error) {
	if depth > maxPortableDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxPortableDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := readOrdered(d, depth+1)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		l := []any{}
		for d.More() {
			v, err := readOrdered(d, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := d.Token()
		return l, err
	}
	return tok, nil
}

// portable rewrites the schema v found under keyword (the top: "").
func portable(v any, keyword string, depth int) (any, bool) {
	if depth > maxPortableDepth {
		return nil, false
	}
	switch s := v.(type) {
	case bool:
		switch {
		case slices.Contains(booleanValued, keyword):
			return s, true
		case s:
			return map[string]any{"anyOf": anyType}, true
		default:
			return map[string]any{"not": map[string]any{}}, true
		}
	case *object:
		return portableObject(s, keyword, depth)
	}
	return v, true // not a schema: left to the validator to refuse
}

// portableObject rewrites the schema object s in place.
func portableObject(s *object, keyword string, depth int) (any, bool) {
	for _, k := range schemaMaps {
		m, ok := s.vals[k].(*object)
		if !ok {
			continue
		}
		for _, name := range m.keys {
			v := m.vals[name]
			if _, isList := v.([]any); k == "dependencies" && isList {
				continue // a property dependency, not a schema
			}
			w, ok := portable(v, k, depth+1)
			if !ok {
				return nil, false
			}
			m.vals[name] = w
		}
	}
	for _, k := range schemaLists {
		if l, ok := s.vals[k].([]any); ok {
			if !portableList(l, k, depth) {
				return nil, false
			}
		}
	}
	for _, k := range schemaOne {
		v, present := s.vals[k]
		if !present {
			continue
		}
		if l, isList := v.([]any); isList && k == "items" {
			if !portableList(l, k, depth) {
				return nil, false
			}
			continue
		}
		w, ok := portable(v, k, depth+1)
		if !ok {
			return nil, false
		}
		s.vals[k] = w
	}
	if types, ok := s.vals["type"].([]any); ok && len(types) > 0 {
		branches := make([]any, 0, len(types))
		for _, t := range types {
			branches = append(branches, map[string]any{"type": t})
		}
		switch prior, hasAnyOf := s.get("anyOf"); {
		case len(types) == 1:
			s.vals["type"] = types[0]
		case hasAnyOf:
			s.del("type")
			s.del("anyOf")
			all, _ := s.vals["allOf"].([]any)
			s.set("allOf", append(all, map[string]any{"anyOf": prior}, map[string]any{"anyOf": branches}))
		default:
			s.del("type")
			s.set("anyOf", branches)
		}
	}
	if keyword != "not" && !constrains(s.vals) {
		if slices.Contains(booleanValued, keyword) {
			return true, true
		}
		s.set("anyOf", anyType)
	}
	return s, true
}

// portableList rewrites a list of schemas in place.
func portableList(l []any, keyword string, depth int) bool {
	for i, v := range l {
		w, ok := portable(v, keyword, depth+1)
		if !ok {
			return false
		}
		l[i] = w
	}
	return true
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}

func constrains(s map[string]any) bool {
	for _, k := range constraining {
		if _, ok := s[k]; ok {
			return true
		}
	}
	_, then := s["then"]
	_, els := s["else"]
	_, cond := s["if"]
	return cond && (then || els)
}

// PortabilityProblems lists where a schema leaves the portable subset
// every provider toold documents accepts: one type per schema, every
// schema saying what it accepts (no {} and no bare boolean but where
// additionalProperties and its kin take one), references inside the
// document only. Nil when there is none (or the schema is not JSON).
func PortabilityProblems(raw json.RawMessage) []string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []string
	checkPortable(v, "", "", 0, &out)
	return out
}

func checkPortable(v any, at, keyword string, depth int, out *[]string) {
	if depth > maxPortableDepth {
		*out = append(*out, at+": nested too deep")
		return
	}
	where := at
	if where == "" {
		where = "(top)"
	}
	switch s := v.(type) {
	case bool:
		if !slices.Contains(booleanValued, keyword) {
			*out = append(*out, fmt.Sprintf("%s: a bare %v where a schema object is needed", where, s))
		}
		return
	case map[string]any:
		if _, list := s["type"].([]any); list {
			*out = append(*out, fmt.Sprintf("%s: type is a list (%v); one type per schema, unions as anyOf", where, s["type"]))
		}
		if keyword != "not" && !constrains(s) {
			*out = append(*out, where+": the schema constrains nothing (say what it accepts)")
		}
		if ref, ok := s["$ref"].(string); ok && !strings.HasPrefix(ref, "#") {
			*out = append(*out, fmt.Sprintf("%s: $ref %q points outside the schema", where, ref))
		}
		for _, k := range schemaMaps {
			if m, ok := s[k].(map[string]any); ok {
				for name, sub := range m {
					if _, isList := sub.([]any); k == "dependencies" && isList {
						continue
					}
					checkPortable(sub, at+"/"+k+"/"+name, k, depth+1, out)
				}
			}
		}
		for _, k := range schemaLists {
			for i, sub := range listOf(s[k]) {
				checkPortable(sub, fmt.Sprintf("%s/%s/%d", at, k, i), k, depth+1, out)
			}
		}
		for _, k := range schemaOne {
			sub, ok := s[k]
			if !ok {
				continue
			}
			if l, isList := sub.([]any); isList && k == "items" {
				for i, it := range l {
					checkPortable(it, fmt.Sprintf("%s/items/%d", at, i), k, depth+1, out)
				}
				continue
			}
			checkPortable(sub, at+"/"+k, k, depth+1, out)
		}
	}
}
