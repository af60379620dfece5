package policy

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/ast"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// Schema is toold's Cedar schema, as `toold policy schema` prints it.
//
//go:embed toold.cedarschema
var Schema []byte

// checker checks policies against a schema.
type checker struct {
	v *validate.Validator
}

// loadSchema parses the schema at path (toold's own when empty).
func loadSchema(path string, read func(string) ([]byte, error)) (*checker, error) {
	var s schema.Schema
	doc, name := Schema, "toold.cedarschema"
	if path != "" {
		var err error
		if doc, err = read(path); err != nil {
			return nil, fmt.Errorf("policy.schema: %w", err)
		}
		name = path
	}
	s.SetFilename(name)
	var err error
	if strings.HasSuffix(name, ".json") {
		err = s.UnmarshalJSON(doc)
	} else {
		err = s.UnmarshalCedar(doc)
	}
	if err != nil {
		return nil, fmt.Errorf("policy.schema: %s: %w", name, err)
	}
	rs, err := s.Resolve()
	if err != nil {
		return nil, fmt.Errorf("policy.schema: %s: %w", name, err)
	}
	return &checker{v: validate.New(rs)}, nil
}

// check validates a policy against the schema (strictly, as Cedar's
// validator does by default), its reads of context.arguments aside: they
// are replaced by a constant first, since the schema cannot type each
// tool's arguments (see toold.cedarschema).
func (c *checker) check(id string, p *cedar.Policy) error {
	masked := withoutArguments((*xast.Policy)(p.AST()), true)
	err := c.v.Policy("", masked)
	if err == nil {
		return nil
	}
	// One line per problem, without the validator's own naming of the
	// policy (the caller names it by its id and place).
	var msgs []string
	for _, e := range flatten(err) {
		if m := e.Error(); !slices.Contains(msgs, m) { // one per action the policy applies to
			msgs = append(msgs, m)
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// castPolicy is the public AST of a policy built on the internal one
// (the same type: x/exp/ast documents the conversion).
func castPolicy(p *xast.Policy) *ast.Policy { return (*ast.Policy)(p) }
