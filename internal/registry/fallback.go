package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toold/toold/internal/strictjson"
)

// checkFallbacks refuses, at start, fallbacks that could not work: a name
// that is not registered, the tool itself, one that needs confirmation (the
// caller confirmed the primary, not it), parameters that would refuse the
// primary's arguments, and cycles.
func (r *Registry) checkFallbacks() []error {
	var errs []error
	for _, e := range r.entries {
		for _, name := range e.Spec.Fallback {
			fb, ok := r.byName[name]
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("tool %q: fallback %q: %s", e.Spec.Name, name, fmt.Sprintf(format, args...)))
			}
			switch {
			case name == e.Spec.Name:
				fail("a tool cannot be its own fallback")
			case !ok:
				fail("no such tool is registered (disabled or misspelt?)")
			case fb.Spec.Confirmation.Required():
				fail("it requires confirmation, which a fallback cannot ask for")
			default:
				if err := compatible(e, fb); err != nil {
					fail("its parameters would refuse %q's arguments: %v", e.Spec.Name, err)
				}
			}
		}
	}
	if cycle := r.fallbackCycle(); cycle != nil {
		errs = append(errs, fmt.Errorf("tool %q: fallbacks form a cycle: %s", cycle[0], strings.Join(cycle, " -> ")))
	}
	return errs
}

// fallbackCycle returns one cycle of the fallback graph, or nil.
func (r *Registry) fallbackCycle() []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch state[name] {
		case onPath:
			return append(slices.Clone(path[slices.Index(path, name):]), name)
		case done:
			return nil
		}
		e, ok := r.byName[name]
		if !ok {
			return nil
		}
		state[name] = onPath
		path = append(path, name)
		for _, next := range e.Spec.Fallback {
			if next == name {
				continue // reported as its own fallback
			}
			if c := visit(next); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return nil
	}
	for _, e := range r.entries {
		if c := visit(e.Spec.Name); c != nil {
			return c
		}
	}
	return nil
}

// compatible reports why fb might refuse arguments that pass primary's
// schema. Deciding that in general is subsumption of JSON Schemas; toold
// checks what goes wrong in practice: a parameter fb requires that primary
// does not, a parameter primary takes that fb refuses as unknown, a
// parameter of another type, and primary's examples failing fb's schema.
func compatible(primary, fb *Entry) error {
	p, f := primary.params.Compiled(), fb.params.Compiled()
	for _, name := range f.Required {
		if !slices.Contains(p.Required, name) {
			return fmt.Errorf("it requires %q, which %q does not", name, primary.Spec.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Properties)) {
		fs, ok := f.Properties[name]
		if !ok {
			if f.AdditionalProperties == false {
				return fmt.Errorf("it does not take %q", name)
			}
			continue
		}
		if pt, ft := types(p.Properties[name]), types(fs); pt != nil && ft != nil && !subset(pt, ft) {
			return fmt.Errorf("%q is %s there, %s here", name, strings.Join(pt, " or "), strings.Join(ft, " or "))
		}
	}
	examples := [][]byte{primary.example}
	for _, ex := range primary.Spec.Examples {
		examples = append(examples, ex.Arguments)
	}
	for _, ex := range examples {
		v, err := strictjson.Decode(ex, 0)
		if err != nil {
			continue // the primary's own check reports it
		}
		if fe := fb.ValidateArgs(v); fe != nil {
			return fmt.Errorf("the example call %s fails: %s %s", compact(ex), fe[0].Pointer, fe[0].Message)
		}
	}
	return nil
}

func types(s *jsonschema.Schema) []string {
	if s.Ref != nil {
		return types(s.Ref)
	}
	if s.Types == nil || s.Types.IsEmpty() {
		return nil
	}
	return s.Types.ToStrings()
}

// subset: every type of a is in b; an integer is a number.
func subset(a, b []string) bool {
	for _, t := range a {
		if !slices.Contains(b, t) && !(t == "integer" && slices.Contains(b, "number")) {
			return false
		}
	}
	return true
}
