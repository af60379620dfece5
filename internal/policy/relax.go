package policy

import (
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
)

// The arguments of a call are not known when a listing decides whether a
// tool is shown ("a tool whose every call is forbidden is not shown"), nor
// typed by the schema when a policy is checked at start. Both replace each
// boolean part of a condition that reads context.arguments by a constant:
// for a listing, true where that makes a permit apply more and a forbid
// less (so a tool is hidden only when no arguments could pass), and for
// the schema check, any constant (the rest of the condition is checked).

// readsArguments reports whether n reads context.arguments, or the
// context as a whole (which holds them).
func readsArguments(n xast.IsNode) bool { return readsContext(n, "arguments") }

// readsContext reports whether n reads context's member name, or the
// context as a whole (which holds it).
func readsContext(n xast.IsNode, name types.String) bool {
	found := false
	xast.Inspect(xast.NewNode(n), func(n xast.IsNode) bool {
		if found {
			return false
		}
		switch x := n.(type) {
		case xast.NodeTypeAccess:
			if isContext(x.Arg) {
				found = x.Value == name
				return false
			}
		case xast.NodeTypeHas:
			if isContext(x.Arg) {
				found = x.Value == name
				return false
			}
		case xast.NodeTypeVariable:
			found = x.Name == "context"
		}
		return true
	})
	return found
}

func isContext(n xast.IsNode) bool {
	v, ok := n.(xast.NodeTypeVariable)
	return ok && v.Name == "context"
}

// replaceArguments returns n with every boolean part that reads the
// arguments replaced by want where it counts as itself, and by !want
// under a negation: through &&, || and !, the parts a condition is made
// of; anything else that reads them is one part.
func replaceArguments(n xast.IsNode, want bool) xast.IsNode {
	switch x := n.(type) {
	case xast.NodeTypeAnd:
		return xast.NodeTypeAnd{BinaryNode: xast.BinaryNode{Left: replaceArguments(x.Left, want), Right: replaceArguments(x.Right, want)}}
	case xast.NodeTypeOr:
		return xast.NodeTypeOr{BinaryNode: xast.BinaryNode{Left: replaceArguments(x.Left, want), Right: replaceArguments(x.Right, want)}}
	case xast.NodeTypeNot:
		return xast.NodeTypeNot{UnaryNode: xast.UnaryNode{Arg: replaceArguments(x.Arg, !want)}}
	}
	if readsArguments(n) {
		return xast.NodeValue{Value: types.Boolean(want)}
	}
	return n
}

// policyReadsArguments reports whether any condition of p reads the
// arguments.
func policyReadsArguments(p *xast.Policy) bool {
	for _, c := range p.Conditions {
		if readsArguments(c.Body) {
			return true
		}
	}
	return false
}

// withoutArguments is p with its conditions' reads of the arguments
// replaced: applies true gives a policy that applies whenever p applies
// for some arguments (for a permit in a listing), false one that applies
// only when p applies whatever the arguments (for a forbid). An unless
// condition is a negation.
func withoutArguments(p *xast.Policy, applies bool) *xast.Policy {
	cp := *p
	cp.Conditions = make([]xast.ConditionType, len(p.Conditions))
	for i, c := range p.Conditions {
		want := applies
		if c.Condition == xast.ConditionUnless {
			want = !applies
		}
		cp.Conditions[i] = xast.ConditionType{Condition: c.Condition, Body: replaceArguments(c.Body, want)}
	}
	return &cp
}

// argumentNames adds to names the top-level argument names n reads
// (context.arguments.x, context.arguments has x), and reports false when
// n reads the arguments (or the context) some other way, so that all of
// them must be converted.
func argumentNames(n xast.IsNode, names map[string]bool) bool {
	only := true
	xast.Inspect(xast.NewNode(n), func(n xast.IsNode) bool {
		var arg xast.IsNode
		var name string
		switch x := n.(type) {
		case xast.NodeTypeAccess:
			arg, name = x.Arg, string(x.Value)
		case xast.NodeTypeHas:
			arg, name = x.Arg, string(x.Value)
		case xast.NodeTypeVariable:
			if x.Name == "context" {
				only = false
			}
			return true
		default:
			return true
		}
		if isArguments(arg) {
			names[name] = true
			return false
		}
		if isContext(arg) {
			if name == "arguments" {
				only = false // the arguments as a whole
			}
			return false
		}
		return true
	})
	return only
}

func isArguments(n xast.IsNode) bool {
	a, ok := n.(xast.NodeTypeAccess)
	return ok && a.Value == "arguments" && isContext(a.Arg)
}
