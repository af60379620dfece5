// Package encodetest holds toold's hand-written JSON encoders to
// encoding/json on values whose every field is filled by reflection, so
// that a field added to a type fails its encoder's test until the encoder
// writes it (or the test says why it must not). Checks that list fields by
// hand see only the fields someone remembered; these grow with the type.
//
// A type's leaves are the values encoding/json writes: every exported
// field not tagged "-", followed into structs, pointers to structs and the
// first element of slices of structs; a time.Time, a json.RawMessage, a
// map, a slice of anything else and any other kind is a leaf. Variants
// gives, for a type, the value with every leaf filled, each leaf alone,
// and every leaf but one (for omitempty): a test encodes each both ways
// and compares them with Same.
//
//	for _, v := range encodetest.Variants[Envelope](t) {
//		encodetest.Same(t, v.Name, mustMarshal(t, (*plain)(v.Value)), v.Value.AppendJSON(nil))
//	}
//
// Only tests import it.
package encodetest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Field is one leaf of a type: its path (Go field names, "[0]" for a
// slice's first element) and how to reach it.
type Field struct {
	Path  string
	steps []step
}

// step is one move from a value to the next: a struct field (index), or
// a slice's first element (index -1); pointers on the way are followed.
type step struct{ index int }

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// Leaves lists typ's leaves (typ a struct type), leaving out the paths
// skip names. It fails tb on a leaf it cannot fill (a channel, a
// function), so a new field of such a kind is noticed too.
func Leaves(tb testing.TB, typ reflect.Type, skip ...string) []Field {
	tb.Helper()
	var out []Field
	walk(tb, typ, "", nil, map[reflect.Type]bool{}, &out)
	var kept []Field
	for _, f := range out {
		if !skipped(f.Path, skip) {
			kept = append(kept, f)
		}
	}
	for _, s := range skip {
		if !hasPrefixPath(out, s) {
			tb.Fatalf("encodetest: %s skips %s, which %s does not have", tb.Name(), s, typ)
		}
	}
	return kept
}

func skipped(path string, skip []string) bool {
	for _, s := range skip {
		if path == s || strings.HasPrefix(path, s+".") || strings.HasPrefix(path, s+"[") {
			return true
		}
	}
	return false
}

func hasPrefixPath(fields []Field, s string) bool {
	for _, f := range fields {
		if skipped(f.Path, []string{s}) {
			return true
		}
	}
	return false
}

func walk(tb testing.TB, typ reflect.Type, path string, steps []step, seen map[reflect.Type]bool, out *[]Field) {
	tb.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ == timeType {
		tb.Fatalf("encodetest: %s is not a struct", typ)
	}
	if seen[typ] {
		return // a recursive type: its fields are covered once
	}
	seen[typ] = true
	defer delete(seen, typ)
	for i := range typ.NumField() {
		sf := typ.Field(i)
		name := strings.Split(sf.Tag.Get("json"), ",")[0]
		if !sf.IsExported() || name == "-" {
			continue
		}
		p := sf.Name
		if path != "" {
			p = path + "." + sf.Name
		}
		s := append(append([]step{}, steps...), step{index: i})
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct && ft != timeType:
			walk(tb, ft, p, s, seen, out)
		case ft.Kind() == reflect.Slice && ft != rawType && elemStruct(ft.Elem()):
			walk(tb, ft.Elem(), p+"[0]", append(s, step{index: -1}), seen, out)
		default:
			if !fillable(ft) {
				tb.Fatalf("encodetest: cannot fill %s (%s)", p, sf.Type)
			}
			*out = append(*out, Field{Path: p, steps: s})
		}
	}
}

func elemStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != timeType
}

func fillable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer, reflect.Array:
		return false
	case reflect.Map:
		return t.Key().Kind() == reflect.String && fillable(t.Elem())
	case reflect.Slice:
		return t == rawType || fillable(t.Elem())
	case reflect.Pointer:
		return fillable(t.Elem())
	}
	return true
}

// Set fills the leaf of v (a pointer to the root) with a value of its own,
// different for each n, allocating what lies on the way.
func (f Field) Set(v reflect.Value, n int) {
	fill(f.reach(v, true), n)
}

// Zero sets the leaf of v back to its zero value, if it is reached.
func (f Field) Zero(v reflect.Value) {
	if leaf := f.reach(v, false); leaf.IsValid() {
		leaf.SetZero()
	}
}

// reach walks to the leaf; alloc makes nil pointers and empty slices on
// the way, else an invalid Value is returned where one is met.
func (f Field) reach(v reflect.Value, alloc bool) reflect.Value {
	for _, s := range f.steps {
		v = deref(v, alloc)
		if !v.IsValid() {
			return v
		}
		if s.index < 0 {
			if v.Len() == 0 {
				if !alloc {
					return reflect.Value{}
				}
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			}
			v = v.Index(0)
			continue
		}
		v = v.Field(s.index)
	}
	return v
}

func deref(v reflect.Value, alloc bool) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			if !alloc {
				return reflect.Value{}
			}
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	return v
}

// base is the instant times are filled from, in UTC as toold writes
// them, with nanoseconds, so that an encoder that drops them is seen.
var base = time.Date(2026, 11, 27, 9, 54, 12, 123456789, time.UTC)

// fill sets v to a non-zero value of its type, told apart by n.
func fill(v reflect.Value, n int) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(base.Add(time.Duration(n) * time.Second)))
		return
	case v.Type() == rawType:
		v.SetBytes([]byte(`{"f":` + strconv.Itoa(n) + `}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("v" + strconv.Itoa(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n%100 + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(n%100 + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.25)
	case reflect.Interface:
		v.Set(reflect.ValueOf("v" + strconv.Itoa(n)))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, n)
		m.SetMapIndex(reflect.ValueOf("k"+strconv.Itoa(n)).Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n+i)
			}
		}
	default:
		panic("encodetest: cannot fill " + v.Type().String())
	}
}

// Variant is one value to encode both ways.
type Variant[T any] struct {
	Name  string
	Value *T
}

// Variants are the values of T to compare a hand-written encoder with
// encoding/json on: every leaf filled; each leaf alone; and every leaf but
// one. skip names leaves (or whole subtrees) left zero in all of them,
// each for a reason the caller gives.
func Variants[T any](tb testing.TB, skip ...string) []Variant[T] {
	tb.Helper()
	leaves := Leaves(tb, reflect.TypeFor[T](), skip...)
	all := func() *T {
		v := new(T)
		for i, f := range leaves {
			f.Set(reflect.ValueOf(v), i)
		}
		return v
	}
	out := []Variant[T]{{Name: "every field", Value: all()}}
	for i, f := range leaves {
		only := new(T)
		f.Set(reflect.ValueOf(only), i)
		out = append(out, Variant[T]{Name: "only " + f.Path, Value: only})
		but := all()
		f.Zero(reflect.ValueOf(but))
		out = append(out, Variant[T]{Name: "all but " + f.Path, Value: but})
	}
	return out
}

// Same fails tb unless got is valid JSON holding the value want holds
// (members in any order, numbers compared as written).
func Same(tb testing.TB, name string, want, got []byte) {
	tb.Helper()
	w, err := decode(want)
	if err != nil {
		tb.Fatalf("%s: the reference is not JSON: %v\n%s", name, err, want)
	}
	g, err := decode(got)
	if err != nil {
		tb.Fatalf("%s: the encoder wrote invalid JSON: %v\n%s", name, err, got)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		tb.Errorf("%s: (-encoding/json +encoder):\n%s", name, diff)
	}
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
