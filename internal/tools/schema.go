package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// SchemaFor derives the JSON Schema (draft 2020-12) of a Go type, the way
// Typed does for a tool's parameters. Struct fields are named by their json
// tag and are required unless tagged omitempty/omitzero or of pointer type;
// unknown properties are refused. These tags add to it:
//
//	desc:"..."     the property's description
//	default:"..."  its default (JSON, or a bare string for string fields)
//	validate:"..." validator/v10 rules; those JSON Schema can say (min, max,
//	               len, gt/gte/lt/lte, oneof, unique, email, url, uuid, dive)
//	               are also written into the schema, the rest are checked by
//	               the validator after schema validation.
//
// forOutput marks values Go may marshal as null (nil slices, maps and
// pointers) as nullable, so a result schema never rejects a valid result.
func SchemaFor(t reflect.Type, forOutput bool) (json.RawMessage, error) {
	g := schemaGen{output: forOutput, seen: map[reflect.Type]bool{}}
	s, err := g.typ(t)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

type schemaGen struct {
	output bool
	seen   map[reflect.Type]bool
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func (g *schemaGen) typ(t reflect.Type) (*node, error) {
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	s := &node{}
	switch {
	case t == timeType:
		s.set("type", "string").set("format", "date-time")
	case t == rawType || t.Kind() == reflect.Interface:
		// any JSON value
	case t.Kind() == reflect.String:
		s.set("type", "string")
	case t.Kind() == reflect.Bool:
		s.set("type", "boolean")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		s.set("type", "integer")
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr:
		s.set("type", "integer").set("minimum", 0)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s.set("type", "number")
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		s.set("type", "string").set("contentEncoding", "base64")
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		items, err := g.typ(t.Elem())
		if err != nil {
			return nil, err
		}
		s.set("type", "array").set("items", items)
		nullable = nullable || t.Kind() == reflect.Slice
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		vals, err := g.typ(t.Elem())
		if err != nil {
			return nil, err
		}
		s.set("type", "object").set("additionalProperties", vals)
		nullable = true
	case t.Kind() == reflect.Struct:
		if err := g.object(t, s); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("type %v cannot be described by a JSON Schema", t)
	}
	if nullable && g.output {
		if typ, ok := s.get("type").(string); ok {
			s.set("type", []string{typ, "null"})
		}
	}
	return s, nil
}

func (g *schemaGen) object(t reflect.Type, s *node) error {
	if g.seen[t] {
		return fmt.Errorf("type %v is recursive; describe it with an explicit schema", t)
	}
	g.seen[t] = true
	defer delete(g.seen, t)
	props, required := &node{}, []string{}
	if err := g.fields(t, props, &required); err != nil {
		return err
	}
	s.set("type", "object").set("properties", props)
	if len(required) > 0 {
		s.set("required", required)
	}
	s.set("additionalProperties", false)
	return nil
}

func (g *schemaGen) fields(t reflect.Type, props *node, required *[]string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if err := g.fields(f.Type, props, required); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		p, err := g.field(f)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		props.set(name, p)
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") ||
			f.Type.Kind() == reflect.Pointer || p.get("default") != nil
		if !optional {
			*required = append(*required, name)
		}
	}
	return nil
}

func (g *schemaGen) field(f reflect.StructField) (*node, error) {
	p, err := g.typ(f.Type)
	if err != nil {
		return nil, err
	}
	if d := f.Tag.Get("desc"); d != "" {
		p.set("description", d)
	}
	if d, ok := f.Tag.Lookup("default"); ok {
		var v any
		if json.Unmarshal([]byte(d), &v) != nil {
			v = d // a bare string
		}
		p.set("default", v)
	}
	applyRules(p, f.Tag.Get("validate"))
	return p, nil
}

// applyRules writes the validator rules JSON Schema can express into s; after
// "dive" the rules apply to the items of an array or the values of a map.
func applyRules(s *node, rules string) {
	if rules == "" {
		return
	}
	head, tail, dive := strings.Cut(rules, ",dive")
	typ, _ := s.get("type").(string)
	if list, ok := s.get("type").([]string); ok {
		typ = list[0]
	}
	for _, r := range strings.Split(head, ",") {
		name, param, _ := strings.Cut(r, "=")
		applyRule(s, typ, name, param)
	}
	if dive {
		tail = strings.TrimPrefix(tail, ",")
		if items, ok := s.get("items").(*node); ok {
			applyRules(items, tail)
		} else if vals, ok := s.get("additionalProperties").(*node); ok {
			applyRules(vals, tail)
		}
	}
}

func applyRule(s *node, typ, name, param string) {
	bound := map[string][3]string{ // rule -> keyword for number, string, array
		"min": {"minimum", "minLength", "minItems"},
		"gte": {"minimum", "minLength", "minItems"},
		"max": {"maximum", "maxLength", "maxItems"},
		"lte": {"maximum", "maxLength", "maxItems"},
		"gt":  {"exclusiveMinimum", "", ""},
		"lt":  {"exclusiveMaximum", "", ""},
	}
	formats := map[string]string{"email": "email", "url": "uri", "uri": "uri", "uuid": "uuid",
		"hostname": "hostname", "ip": "ipv4", "ipv4": "ipv4", "ipv6": "ipv6"}
	idx := map[string]int{"integer": 0, "number": 0, "string": 1, "array": 2}[typ]
	switch {
	case bound[name] != [3]string{}:
		if kw := bound[name][idx]; kw != "" {
			if n, err := strconv.ParseFloat(param, 64); err == nil {
				s.set(kw, n)
			}
		}
	case name == "len":
		if n, err := strconv.Atoi(param); err == nil {
			kw := [3]string{"", "Length", "Items"}[idx]
			if kw != "" {
				s.set("min"+kw, n).set("max"+kw, n)
			}
		}
	case name == "oneof":
		s.set("enum", enumValues(typ, strings.Fields(param)))
	case name == "unique" && typ == "array":
		s.set("uniqueItems", true)
	case formats[name] != "" && typ == "string":
		s.set("format", formats[name])
	case name == "hexadecimal" && typ == "string":
		s.set("pattern", "^(0[xX])?[0-9a-fA-F]+$")
	}
}

func enumValues(typ string, words []string) []any {
	out := make([]any, 0, len(words))
	for _, w := range words {
		if typ == "integer" || typ == "number" {
			if n, err := strconv.ParseFloat(w, 64); err == nil {
				out = append(out, n)
				continue
			}
		}
		out = append(out, w)
	}
	return out
}

// node is a JSON object that keeps its keys in insertion order, so derived
// schemas list properties in the order the Go struct declares them.
type node struct {
	keys []string
	vals map[string]any
}

func (n *node) set(k string, v any) *node {
	if n.vals == nil {
		n.vals = map[string]any{}
	}
	if _, ok := n.vals[k]; !ok {
		n.keys = append(n.keys, k)
	}
	n.vals[k] = v
	return n
}

func (n *node) get(k string) any { return n.vals[k] }

func (n *node) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range n.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(n.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
