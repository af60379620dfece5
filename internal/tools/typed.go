package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"
)

// TypedFunc is the shape of a tool written against Go types.
type TypedFunc[In, Out any] func(ctx context.Context, call *Call, in In) (Out, error)

// Typed adapts a typed function into a Tool. The parameter schema is derived
// from In (see SchemaFor) unless spec.Parameters is set, and the output schema
// from Out when Out is a struct, so the schema /schema serves is the code's.
// After the registry validates the arguments against that schema, Typed
// decodes them into In and runs validator/v10 on it for the rules JSON Schema
// cannot express (cross-field rules, for instance); failures are reported as
// validation errors with JSON pointers, like schema failures.
//
// It panics when In or Out cannot be described: that is a programming error
// found by the first test that builds the tool.
func Typed[In, Out any](spec Spec, fn TypedFunc[In, Out]) Tool {
	in := reflect.TypeFor[In]()
	if spec.Parameters == nil {
		s, err := SchemaFor(in, false)
		if err != nil {
			panic(fmt.Sprintf("tools.Typed %s: parameters: %v", spec.Name, err))
		}
		spec.Parameters = s
	}
	if out := reflect.TypeFor[Out](); spec.Output == nil && isStruct(out) {
		s, err := SchemaFor(out, true)
		if err != nil {
			panic(fmt.Sprintf("tools.Typed %s: output: %v", spec.Name, err))
		}
		spec.Output, spec.OutputDerived = s, true
	}
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			return f.Name
		}
		return name
	})
	return &typed[In, Out]{spec: spec, fn: fn, validate: v, check: isStruct(in), defaults: defaultsOf(in)}
}

// fieldDefault is a top-level field's default, applied when the caller
// leaves the field out: the schema documents it, so the tool must see it.
type fieldDefault struct {
	name  string
	index []int
	value []byte // JSON
}

func defaultsOf(t reflect.Type) []fieldDefault {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []fieldDefault
	for _, f := range reflect.VisibleFields(t) {
		d, ok := f.Tag.Lookup("default")
		if !ok || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		v := []byte(d)
		if !json.Valid(v) {
			v, _ = json.Marshal(d) // a bare string
		}
		out = append(out, fieldDefault{name: name, index: f.Index, value: v})
	}
	return out
}

func isStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != timeType
}

type typed[In, Out any] struct {
	spec     Spec
	fn       TypedFunc[In, Out]
	validate *validator.Validate
	check    bool
	defaults []fieldDefault
}

func (t *typed[In, Out]) Spec() Spec { return t.spec }

func (t *typed[In, Out]) Execute(ctx context.Context, call *Call) (any, error) {
	var in In
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	if err := t.applyDefaults(call.Args, &in); err != nil {
		return nil, err
	}
	if t.check {
		if err := t.validate.StructCtx(ctx, &in); err != nil {
			return nil, validationFailure(err)
		}
	}
	return t.fn(ctx, call, in)
}

func (t *typed[In, Out]) applyDefaults(args json.RawMessage, in *In) error {
	if len(t.defaults) == 0 {
		return nil
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(args, &present); err != nil {
		return Errorf(ValidationError, "arguments must be a JSON object")
	}
	v := reflect.ValueOf(in).Elem()
	for _, d := range t.defaults {
		if _, ok := present[d.name]; ok {
			continue
		}
		if err := json.Unmarshal(d.value, v.FieldByIndex(d.index).Addr().Interface()); err != nil {
			return Errorf(SystemError, "the default of %s does not fit its field", d.name).Wrap(err)
		}
	}
	return nil
}

func validationFailure(err error) error {
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return Errorf(ValidationError, "arguments are invalid").Wrap(err)
	}
	e := Errorf(ValidationError, "%d argument(s) failed validation", len(verrs))
	for _, fe := range verrs {
		e.Fields = append(e.Fields, FieldError{Pointer: namespacePointer(fe.Namespace()), Message: ruleMessage(fe)})
	}
	return e
}

// namespacePointer turns validator's "In.paths[0].name" into "/paths/0/name".
func namespacePointer(ns string) string {
	_, rest, _ := strings.Cut(ns, ".")
	var b strings.Builder
	for _, part := range strings.Split(rest, ".") {
		name, idx, _ := strings.Cut(part, "[")
		b.WriteString("/" + PointerToken(name))
		for idx != "" {
			var key string
			key, idx, _ = strings.Cut(idx, "]")
			b.WriteString("/" + PointerToken(key))
			idx = strings.TrimPrefix(idx, "[")
		}
	}
	return b.String()
}

// PointerToken escapes one reference token of a JSON Pointer (RFC 6901):
// "~" as "~0", "/" as "~1".
func PointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func ruleMessage(fe validator.FieldError) string {
	p := fe.Param()
	switch fe.Tag() {
	case "required":
		return "is required"
	case "min", "gte":
		return "must be at least " + p
	case "max", "lte":
		return "must be at most " + p
	case "gt":
		return "must be greater than " + p
	case "lt":
		return "must be less than " + p
	case "len":
		return "must have length " + p
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(p), ", ")
	case "required_without":
		return "is required when " + p + " is not given"
	case "excluded_with":
		return "must not be given together with " + p
	}
	if p != "" {
		return fmt.Sprintf("fails the %q rule (%s)", fe.Tag(), p)
	}
	return fmt.Sprintf("fails the %q rule", fe.Tag())
}
