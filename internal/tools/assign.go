package tools

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// assign stores a decoded JSON tree (map[string]any, []any, string,
// json.Number, bool, nil: what the pipeline validated) into v. Typed tools
// take their arguments this way rather than parsing the JSON text a second
// time. Values under an `any` field keep the tree's types (json.Number for
// numbers, so no precision is lost).
func assign(v reflect.Value, tree any, path *pointer) error {
	if tree == nil {
		v.SetZero()
		return nil
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return assign(v.Elem(), tree, path)
	}
	if done, err := assignSpecial(v, tree, path); done {
		return err
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(tree))
			return nil
		}
	case reflect.String:
		if s, ok := tree.(string); ok {
			v.SetString(s)
			return nil
		}
	case reflect.Bool:
		if b, ok := tree.(bool); ok {
			v.SetBool(b)
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n, ok := tree.(json.Number); ok {
			i, err := n.Int64()
			if err != nil || v.OverflowInt(i) {
				return mismatch(path, "an integer that fits", tree)
			}
			v.SetInt(i)
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if n, ok := tree.(json.Number); ok {
			i, err := n.Int64()
			if err != nil || i < 0 || v.OverflowUint(uint64(i)) {
				return mismatch(path, "a non-negative integer that fits", tree)
			}
			v.SetUint(uint64(i))
			return nil
		}
	case reflect.Float32, reflect.Float64:
		if n, ok := tree.(json.Number); ok {
			f, err := n.Float64()
			if err != nil || math.IsInf(f, 0) || v.OverflowFloat(f) {
				return mismatch(path, "a number that fits", tree)
			}
			v.SetFloat(f)
			return nil
		}
	case reflect.Slice, reflect.Array:
		if a, ok := tree.([]any); ok {
			return assignList(v, a, path)
		}
	case reflect.Map:
		if m, ok := tree.(map[string]any); ok && v.Type().Key().Kind() == reflect.String {
			return assignMap(v, m, path)
		}
	case reflect.Struct:
		if m, ok := tree.(map[string]any); ok {
			return assignStruct(v, m, path)
		}
	}
	return mismatch(path, v.Type().String(), tree)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// assignSpecial handles the types whose JSON form is not their Go shape.
func assignSpecial(v reflect.Value, tree any, path *pointer) (bool, error) {
	t := v.Type()
	switch {
	case t == timeType:
		s, ok := tree.(string)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if !ok || err != nil {
			return true, mismatch(path, "an RFC 3339 time", tree)
		}
		v.Set(reflect.ValueOf(tm))
		return true, nil
	case t == rawType:
		b, err := json.Marshal(tree)
		v.SetBytes(b)
		return true, err
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		s, ok := tree.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if !ok || err != nil {
			return true, mismatch(path, "base64 text", tree)
		}
		v.SetBytes(b)
		return true, nil
	case reflect.PointerTo(t).Implements(jsonUnmarshaler):
		b, err := json.Marshal(tree)
		if err == nil {
			err = v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b)
		}
		return true, err
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		s, ok := tree.(string)
		if !ok {
			return true, mismatch(path, "a string", tree)
		}
		return true, v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	return false, nil
}

func assignList(v reflect.Value, a []any, path *pointer) error {
	if v.Kind() == reflect.Array {
		if len(a) != v.Len() {
			return Errorf(ValidationError, "%s must have %d items", pathOrTop(path.String()), v.Len())
		}
	} else {
		v.Set(reflect.MakeSlice(v.Type(), len(a), len(a)))
	}
	for i, item := range a {
		path = path.push(token{index: i})
		if err := assign(v.Index(i), item, path); err != nil {
			return err
		}
		path.pop()
	}
	return nil
}

func assignMap(v reflect.Value, m map[string]any, path *pointer) error {
	if v.Type().Elem().Kind() == reflect.Interface && v.Type().Elem().NumMethod() == 0 && v.Type().Key() == reflect.TypeFor[string]() {
		v.Set(reflect.ValueOf(m)) // map[string]any: the tree's own map
		return nil
	}
	out := reflect.MakeMapWithSize(v.Type(), len(m))
	for k, item := range m {
		e := reflect.New(v.Type().Elem()).Elem()
		path = path.push(token{name: k, named: true})
		if err := assign(e, item, path); err != nil {
			return err
		}
		path.pop()
		out.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
	}
	v.Set(out)
	return nil
}

func assignStruct(v reflect.Value, m map[string]any, path *pointer) error {
	for _, f := range fieldsOf(v.Type()) {
		item, ok := m[f.name]
		if !ok {
			continue
		}
		path = path.push(token{name: f.name, named: true})
		if err := assign(v.FieldByIndex(f.index), item, path); err != nil {
			return err
		}
		path.pop()
	}
	return nil
}

// structField is a field assign fills: its JSON name and where it is.
type structField struct {
	name  string
	index []int
}

// structFields caches fieldsOf by type: the walk of a struct's fields
// (reflect.VisibleFields allocates) is done once per type, not per call.
var structFields sync.Map // reflect.Type -> []structField

// fieldsOf lists the exported fields of struct type t under their JSON
// names, those of embedded structs included, json:"-" left out.
func fieldsOf(t reflect.Type) []structField {
	if fs, ok := structFields.Load(t); ok {
		return fs.([]structField)
	}
	var fs []structField
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue // embedded structs' fields are visited themselves
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, structField{name: name, index: f.Index})
	}
	structFields.Store(t, fs)
	return fs
}

// pointer is the JSON Pointer of the value being assigned, kept as a
// stack of tokens and spelled out only for an error: building the string
// for every value would cost a call allocations it almost never needs.
// One pointer serves a whole assign; nil is the root.
type pointer struct {
	toks []token
}

// token is one step: an object member's name when named, an array
// item's index otherwise.
type token struct {
	name  string
	index int
	named bool
}

func (p *pointer) push(t token) *pointer {
	if p == nil {
		p = &pointer{toks: make([]token, 0, 4)}
	}
	p.toks = append(p.toks, t)
	return p
}

func (p *pointer) pop() { p.toks = p.toks[:len(p.toks)-1] }

// String is the pointer's RFC 6901 form; "" for the root.
func (p *pointer) String() string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, t := range p.toks {
		b.WriteByte('/')
		if t.named {
			b.WriteString(PointerToken(t.name))
		} else {
			b.WriteString(strconv.Itoa(t.index))
		}
	}
	return b.String()
}

func mismatch(at *pointer, want string, got any) *Error {
	path := at.String()
	e := Errorf(ValidationError, "%s must be %s", pathOrTop(path), want)
	e.Fields = []FieldError{{Pointer: path, Message: fmt.Sprintf("must be %s, not %T", want, got)}}
	return e
}

func pathOrTop(p string) string {
	if p == "" {
		return "the arguments"
	}
	return p
}
