// Package registry holds the tools a toold instance serves: unique names,
// resolved limits, every schema compiled once, and the discovery renderings
// of the same set for each kind of consumer.
package registry

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toold/toold/internal/search"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// Options adjust the tools as the operator configured them.
type Options struct {
	// Defaults replace the design's category defaults; zero fields inherit.
	Defaults map[tools.Category]tools.Limits
	// Overrides adjust single tools by name.
	Overrides map[string]Override
}

// Override is an operator's adjustment of one tool.
type Override struct {
	Description string
	Limits      tools.Limits
	// Fallback, when set, replaces the tool's own fallbacks.
	Fallback []string
	// Confirmation, when set, replaces the tool's own ("none" turns
	// confirmation off).
	Confirmation string
	// MaxResultBytes, when not zero, replaces the tool's result budget
	// (tools.NoBudget: none).
	MaxResultBytes int64
}

// Registry is an immutable set of tools; safe for concurrent use.
type Registry struct {
	entries []*Entry // sorted by name
	byName  map[string]*Entry
	// aliases maps the function names that differ from their tool's name
	// to that name.
	aliases map[string]string
	// index is the search index of this snapshot's tools, built on the
	// first search (see search.go).
	index indexOnce
	// held are the tools an upstream lists that the snapshot leaves out
	// until a person accepts their definitions (pinning): by name, the
	// reason a call of one is refused.
	held map[string]heldTool
}

// heldTool is a tool a source holds back, and why.
type heldTool struct{ source, why string }

// Entry is a registered tool with its resolved spec and compiled schemas.
type Entry struct {
	Tool tools.Tool
	// Spec is the tool's spec after overrides, with Limits fully resolved.
	Spec tools.Spec

	params  *tools.Schema
	output  *tools.Schema
	example json.RawMessage
	fname   string // FunctionName(Spec.Name)

	docOnce sync.Once
	doc     search.Doc // what a search finds the tool by

	policy policyMemo // the tool as policies see it (view.go)
}

// New builds a registry. Every problem (duplicate or invalid name, invalid
// schema, example that fails its own schema, impossible limits, override of
// an unknown tool, a fallback that could not work) is reported, each naming
// its tool.
func New(opts Options, ts ...tools.Tool) (*Registry, error) {
	r := newRegistry()
	var errs []error
	for _, t := range ts {
		e, err := newEntry(t, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if o := r.nameTaken(e); o != nil {
			errs = append(errs, duplicate(e, o))
			continue
		}
		r.add(e)
	}
	for name := range opts.Overrides {
		if _, ok := r.byName[name]; !ok {
			errs = append(errs, fmt.Errorf("tool %q: configured but not registered (disabled or misspelt?)", name))
		}
	}
	r.sort()
	errs = append(errs, r.checkFallbacks()...)
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return r, errors.Join(errs...)
}

// ReservedNames are the tool names a route under /tools/ owns. chi tries
// a static segment before {name}, so POST /tools/changes/execute would
// reach the admin's change decision, never a tool named "changes".
// (/tools/search has no child routes: a tool named "search" is served.)
var ReservedNames = map[string]string{
	"changes": "POST /tools/changes/{name} decides a hosted tool's pending change",
}

func newEntry(t tools.Tool, opts Options) (*Entry, error) {
	spec := t.Spec()
	if !tools.NamePattern.MatchString(spec.Name) {
		return nil, fmt.Errorf("tool %q: name must match %s", spec.Name, tools.NamePattern)
	}
	if why, ok := ReservedNames[spec.Name]; ok {
		return nil, fmt.Errorf("tool %q: the name is reserved (%s); rename the tool", spec.Name, why)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("tool %q: %s", spec.Name, fmt.Sprintf(format, args...))
	}
	if !spec.Category.Valid() {
		return nil, fail("unknown category %q", spec.Category)
	}
	if strings.TrimSpace(spec.Description) == "" {
		return nil, fail("description is empty; models choose tools by it")
	}
	ov := opts.Overrides[spec.Name]
	if ov.Description != "" {
		spec.Description = ov.Description
	}
	if ov.Fallback != nil {
		spec.Fallback = ov.Fallback
	}
	if ov.MaxResultBytes != 0 {
		spec.MaxResultBytes = ov.MaxResultBytes
	}
	if err := resolveConfirmation(&spec, ov.Confirmation); err != nil {
		return nil, fail("%v", err)
	}
	limits, err := opts.ResolveLimits(spec.Category, ov.Limits.Merge(spec.Limits))
	if err != nil {
		return nil, fail("limits: %v", err)
	}
	spec.Limits = limits
	// One form of each schema for validation, every rendering and search:
	// the portable one (portable.go), which means the same.
	spec.Parameters = Portable(spec.Parameters)
	if spec.Output != nil {
		spec.Output = Portable(spec.Output)
	}
	e := &Entry{Tool: t, Spec: spec, fname: FunctionName(spec.Name)}
	if e.params, err = tools.CompileSchema(spec.Name, "parameters", spec.Parameters); err != nil {
		return nil, fail("%v", err)
	}
	// Model APIs (function calling, MCP) require an object at the top,
	// said literally rather than through a $ref.
	if ts := e.params.Compiled().Types; ts == nil || ts.String() != "[object]" {
		return nil, fail(`parameters schema must declare "type": "object" at its top level`)
	}
	if spec.Output != nil {
		if e.output, err = tools.CompileSchema(spec.Name, "output", spec.Output); err != nil {
			return nil, fail("%v", err)
		}
	}
	for i, ex := range spec.Examples {
		v, err := strictjson.Decode(ex.Arguments, 0)
		if err == nil {
			if fe := e.ValidateArgs(v); fe != nil {
				err = fmt.Errorf("%s %s", fe[0].Pointer, fe[0].Message)
			}
		}
		if err != nil {
			return nil, fail("example %d does not fit the parameters schema: %v", i+1, err)
		}
	}
	e.example = buildExample(spec, e.params.Compiled())
	return e, nil
}

// duplicate is the error of a tool e whose name or function name o holds.
func duplicate(e, o *Entry) error {
	if o.Spec.Name == e.Spec.Name {
		return fmt.Errorf("tool %q: registered twice; tool names must be unique", e.Spec.Name)
	}
	return fmt.Errorf("tool %q: its name or function name %q is taken by the tool %q (source %q); rename one of them",
		e.Spec.Name, e.fname, o.Spec.Name, cmp.Or(o.Spec.Source, "toold"))
}

// ResolveLimits completes a tool's limits as the registry serves them:
// own (the operator's override of the tool over the tool's own limits),
// then the operator's defaults for the category, then the design's; limits
// that cannot work together are an error. The tools of an upstream MCP
// server arrive while toold serves, long after the configuration was
// checked: their limits are resolved with it there too, so that the
// server's limits are judged as its tools' will be.
func (o Options) ResolveLimits(cat tools.Category, own tools.Limits) (tools.Limits, error) {
	l := own.Merge(o.Defaults[cat]).Merge(tools.DefaultLimits(cat))
	return l, l.Validate()
}

// resolveConfirmation settles how a tool is confirmed: the operator's
// override, else the tool's own mode, else a token when the tool only says
// it requires confirmation.
func resolveConfirmation(spec *tools.Spec, override string) error {
	switch {
	case override == "none":
		spec.Confirmation = tools.ConfirmNone
	case override != "":
		spec.Confirmation = tools.Confirmation(override)
	}
	if !spec.Confirmation.Valid() {
		return fmt.Errorf("confirmation %q is not one of none, token, human", spec.Confirmation)
	}
	return nil
}

// Held reports whether the snapshot holds a tool back (its upstream's
// definition of it changed, or it is new, and no one accepted it yet),
// and why.
func (r *Registry) Held(name string) (string, bool) {
	h, ok := r.held[name]
	return h.why, ok
}

// Lookup finds a tool by name.
func (r *Registry) Lookup(name string) (*Entry, bool) {
	e, ok := r.byName[name]
	return e, ok
}

// Entries returns every tool, sorted by name. Callers must not modify it.
func (r *Registry) Entries() []*Entry { return r.entries }

// Len is the number of tools.
func (r *Registry) Len() int { return len(r.entries) }

// AcceptsWrapper reports whether a request body {"arguments": {...}} is
// unwrapped for this tool; it is not when the tool has a parameter of that
// name, so such a tool's own argument is never misread.
func (e *Entry) AcceptsWrapper() bool {
	_, own := e.params.Compiled().Properties["arguments"]
	return !own
}

// Example returns an arguments object that passes the parameters schema:
// the tool's first example, or one built from the schema.
func (e *Entry) Example() json.RawMessage { return e.example }

// ChecksOutput reports whether results are validated against an output
// schema: one the tool declared, not one derived from its Go result type.
func (e *Entry) ChecksOutput() bool { return e.output != nil && !e.Spec.OutputDerived }
