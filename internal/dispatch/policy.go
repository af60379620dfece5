package dispatch

import (
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// The policy stage (Options.Policy): every call is decided after its
// arguments are validated and sanitized — so the policy sees what the
// tool would receive — and before it waits for a person or runs, whichever
// way it came (Request.Via). Listings ask the same engine through View.

// decide passes c through the policy, when one is configured.
func (d *Dispatcher) decide(c *call) error {
	eng := c.st.Policy
	if eng == nil {
		return nil
	}
	dec := eng.Decide(&policy.Request{Action: policy.Call, Principal: policy.NewPrincipal(c.req.Principal),
		Resource: c.entry.PolicyResource(c.st.Toolsets), Arguments: c.tree, Via: c.req.Via, Time: time.Now()})
	if dec.Allowed {
		return nil
	}
	return Denied(c.entry.Spec.Name, "call", dec)
}

// Denied is the refusal of a request a policy decided against: 403
// policy_denied, naming the policies that decided (their ids, never their
// text). what is the action refused ("call", "approve").
func Denied(tool, what string, dec policy.Decision) *tools.Error {
	var e *tools.Error
	switch {
	case dec.Err != nil:
		e = tools.NewPermissionError("the policy cannot decide on this %s of %q: %v", what, tool, dec.Err)
	case len(dec.Policies) == 0:
		e = tools.NewPermissionError("no policy permits this %s of %q", what, tool)
	default:
		e = tools.NewPermissionError("the policy refuses this %s of %q (decided by %s)", what, tool, quoteAll(dec.Policies))
	}
	return e.WithCode(tools.CodePolicyDenied).
		WithSuggestion("change the call, or ask the operator, who can test the request with toold policy test")
}

func quoteAll(ids []string) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('"')
		b.WriteString(id)
		b.WriteByte('"')
	}
	return b.String()
}

// Policy is the policy engine calls are decided by; nil without one.
func (d *Dispatcher) Policy() *policy.Engine { return d.current().Policy }

// View is the view of a caller (id, nil for the local one) who may use
// the tools allowed accepts (nil: all), listing by way of via: every
// listing filters through it (registry.View).
func (d *Dispatcher) View(id *auth.Identity, allowed func(string) bool, via string) *registry.View {
	st := d.current()
	v := &registry.View{Allowed: allowed, Toolsets: st.Toolsets}
	if eng := st.Policy; eng != nil {
		v.Listing = eng.Listing(id, via, time.Now())
	}
	return v
}

// listed narrows what a tool the call runs may see of the catalog (the
// search tool's matches) to what the caller could list: its own tools,
// and with a policy, what the policy shows it.
func (d *Dispatcher) listed(c *call) func(string) bool {
	if c.st.Policy == nil {
		return c.req.Allowed
	}
	var v *registry.View // built when the tool first asks: most never do
	reg := d.Registry()
	return func(tool string) bool {
		if v == nil {
			v = d.View(c.req.Principal, c.req.Allowed, c.req.Via)
		}
		e, ok := reg.Lookup(tool)
		return ok && v.Shows(e)
	}
}

// MayApprove is the policy's word on whether id may decide on a call of
// tool with args (its body as the call sent it) that waits for a person:
// nil when it may (or no policy is configured), else the refusal
// (policy_denied). via is how the approver came (rest, console).
func (d *Dispatcher) MayApprove(id *auth.Identity, via, tool string, args []byte) *tools.Error {
	st := d.current()
	eng := st.Policy
	if eng == nil {
		return nil
	}
	res := policy.NewResource(policy.Tool{Name: tool}) // a tool gone since: its name only
	tree, _ := strictjson.Decode(args, d.opts.MaxDepth)
	if e, ok := d.Registry().Lookup(tool); ok {
		res = e.PolicyResource(st.Toolsets)
		if inner, ok := unwrap(tree, e.AcceptsWrapper()); ok {
			tree = inner
		}
	}
	dec := eng.Decide(&policy.Request{Action: policy.Approve, Principal: policy.NewPrincipal(id), Resource: res,
		Arguments: tree, Via: via, Time: time.Now()})
	if dec.Allowed {
		return nil
	}
	return Denied(tool, "approval", dec)
}

// Observes returns whether id may see the calls of a tool in the activity
// stream (the observe action), deciding once per tool: for one reader of
// the stream, not for concurrent use. Without a policy every tool is
// observed.
func (d *Dispatcher) Observes(id *auth.Identity, via string) func(tool string) bool {
	st := d.current()
	eng := st.Policy
	if eng == nil {
		return func(string) bool { return true }
	}
	p, seen := policy.NewPrincipal(id), map[string]bool{}
	return func(tool string) bool {
		if ok, done := seen[tool]; done {
			return ok
		}
		res := policy.NewResource(policy.Tool{Name: tool})
		if e, ok := d.Registry().Lookup(tool); ok {
			res = e.PolicyResource(st.Toolsets)
		}
		ok := eng.Decide(&policy.Request{Action: policy.Observe, Principal: p, Resource: res, Via: via, Time: time.Now()}).Allowed
		if len(seen) < 4096 {
			seen[tool] = ok
		}
		return ok
	}
}
