// Package policy decides, with Cedar policies (the Cedar project's Go
// implementation, cedar-go), who may list, call, approve and observe which
// tool, with which arguments. It is one decision function, Engine.Decide,
// over toold's entities (toold.cedarschema): the principal
// (toold::User::"<issuer>|<sub>" with groups and client_id,
// toold::Key::"<name>", toold::Local::"local"), the action
// (toold::Action::"list", "call", "approve", "observe"), the tool
// (toold::Tool::"<name>" with kind, server, read_only, destructive,
// toolsets) and the context (via, time, and for call and approve the
// call's arguments as a record).
//
// A request is allowed when a permit applies and no forbid does (Cedar's
// semantics), with one change that fails closed: a forbid that cannot be
// evaluated (an argument or attribute missing, a type that does not fit)
// refuses, naming itself. Policies are named by their @id annotation, or
// by their place ("policies.cedar:12:1"); a decision names the policies
// that made it, never their text.
//
// Load checks every policy against the schema at start (a bad one is an
// error naming its file, line and column); conditions on
// context.arguments are checked when they run, since each tool's
// arguments have a shape of their own.
//
//	eng, err := policy.Load(policy.Config{Files: []string{"policies.cedar"}}, os.ReadFile)
//	if err != nil {
//		return err // "policies.cedar:3:1: policy "deploys": ..."
//	}
//	d := eng.Decide(&policy.Request{Action: policy.Call, Principal: policy.NewPrincipal(id),
//		Resource: policy.NewResource(policy.Tool{Name: "deploy", Kind: "system_command"}),
//		Arguments: args, Via: policy.ViaREST, Time: time.Now()})
//	if !d.Allowed {
//		// 403 policy_denied, naming d.Policies
//	}
package policy

import (
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"time"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
)

// Config is the policy section of the configuration.
type Config struct {
	// Files are Cedar policy files, read in order; policy ids (@id)
	// must be unique across them.
	Files []string `yaml:"files"`
	// Schema is a Cedar schema file (.cedarschema, or .json in Cedar's
	// JSON form) the policies are checked against; empty: toold's own
	// (toold policy schema prints it).
	Schema string `yaml:"schema"`
}

// Enabled reports whether any policy file is configured.
func (c Config) Enabled() bool { return len(c.Files) > 0 }

// Engine decides requests; safe for concurrent use, immutable once
// loaded.
type Engine struct {
	// byAction holds, for each action, the policies its action scope
	// admits: general ones, and those naming one tool (by tool name).
	byAction map[Action]*index
	// maybeCall are the call policies with their reads of the arguments
	// replaced (see relax.go): what a listing asks of a call.
	maybeCall *index
	// names are the top-level arguments policies read (all: any of
	// them reads the arguments otherwise): only those are converted.
	names map[string]bool
	all   bool
	count int
	info  map[types.PolicyID]policyInfo
	// What a listing's decisions depend on (listing.go): the tools list
	// and call policies name, whether tools alike in their attributes
	// are decided alike (no policy compares the resource itself), and
	// whether a policy reads the time.
	named        map[types.String]bool
	byAttributes bool
	readsTime    bool
	listings     listings
	classes      classes
}

type policyInfo struct {
	effect types.Effect
}

// index is the policies of one action: those that may apply to any tool,
// and, for each tool some policy names in its resource scope, those and
// the general ones together.
type index struct {
	general policies
	byTool  map[types.String]policies
	// reads says which of them read the arguments: the general ones, or
	// those of a tool.
	reads       bool
	readsByTool map[types.String]bool
}

type entry struct {
	id types.PolicyID
	p  *cedar.Policy
}

// policies are the policies one request is decided by.
type policies []entry

func (ps *policies) All() iter.Seq2[types.PolicyID, *cedar.Policy] {
	return func(yield func(types.PolicyID, *cedar.Policy) bool) {
		for _, e := range *ps {
			if !yield(e.id, e.p) {
				return
			}
		}
	}
}

func (ix *index) of(tool types.String) *policies {
	if ps, ok := ix.byTool[tool]; ok {
		return &ps
	}
	return &ix.general
}

// readsArguments reports whether a policy a request of tool is decided by
// reads the arguments.
func (ix *index) readsArguments(tool types.String) bool { return ix.reads || ix.readsByTool[tool] }

func (ix *index) add(e entry, tool types.String, named, reads bool) {
	if !named {
		ix.general = append(ix.general, e)
		ix.reads = ix.reads || reads
		for t, ps := range ix.byTool {
			ix.byTool[t] = append(ps, e)
		}
		return
	}
	if ix.byTool == nil {
		ix.byTool, ix.readsByTool = map[types.String]policies{}, map[types.String]bool{}
	}
	if _, ok := ix.byTool[tool]; !ok {
		ix.byTool[tool] = slices.Clone(ix.general)
	}
	ix.byTool[tool] = append(ix.byTool[tool], e)
	ix.readsByTool[tool] = ix.readsByTool[tool] || reads
}

// Request is one question to the engine.
type Request struct {
	Action    Action
	Principal *Principal
	Resource  *Resource
	// Arguments are the call's decoded arguments (call and approve).
	Arguments any
	// Via is the way in (ViaREST, ...).
	Via  string
	Time time.Time
}

// Decision is the engine's answer.
type Decision struct {
	Allowed bool
	// Policies are the ids of the policies that decided: for a refusal,
	// the forbids that applied or could not be evaluated (none when no
	// permit applied); for an allowance, the permits that applied.
	Policies []string
	// Err says why the request could not be decided (arguments past
	// the conversion's bounds); Allowed is false then.
	Err error
}

// Len is the number of policies loaded.
func (e *Engine) Len() int { return e.count }

// Decide decides one request.
func (e *Engine) Decide(r *Request) Decision {
	return e.decide(e.byAction[r.Action], r, r.Action == Call || r.Action == Approve)
}

func (e *Engine) decide(ix *index, r *Request, withArgs bool) Decision {
	if ix == nil {
		return Decision{}
	}
	tool := r.Resource.entity.UID.ID
	ctx := types.RecordMap{"via": types.String(r.Via), "time": types.NewDatetime(r.Time)}
	if withArgs && ix.readsArguments(tool) {
		v, err := e.arguments(r.Arguments)
		if err != nil {
			return Decision{Err: err}
		}
		ctx["arguments"] = v
	}
	req := cedar.Request{Principal: r.Principal.entity.UID, Action: r.Action.uid(), Resource: r.Resource.entity.UID,
		Context: types.NewRecord(ctx)}
	ok, diag := cedar.Authorize(ix.of(tool), pair{r.Principal, &r.Resource.entity}, req)
	// A forbid that could not be evaluated refuses (fail closed): Cedar
	// would skip it, and a condition on an argument left out would let
	// the call through.
	var failed []string
	for _, de := range diag.Errors {
		if e.info[de.PolicyID].effect == types.Forbid {
			failed = append(failed, string(de.PolicyID))
		}
	}
	if len(failed) > 0 {
		ids := failed
		if !ok {
			ids = append(reasons(diag), failed...)
		}
		return Decision{Policies: sortedUnique(ids)}
	}
	return Decision{Allowed: bool(ok), Policies: sortedUnique(reasons(diag))}
}

func reasons(diag types.Diagnostic) []string {
	if len(diag.Reasons) == 0 {
		return nil
	}
	out := make([]string, len(diag.Reasons))
	for i, r := range diag.Reasons {
		out[i] = string(r.PolicyID)
	}
	return out
}

func sortedUnique(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// arguments converts the arguments policies read: only the top-level
// names they read, unless one reads them otherwise.
func (e *Engine) arguments(args any) (types.Value, error) {
	m, ok := args.(map[string]any)
	if e.all || !ok {
		return Arguments(args)
	}
	c := converter{left: MaxArgumentValues}
	rec := make(types.RecordMap, len(e.names))
	for name := range e.names {
		if v, ok := m[name]; ok && v != nil {
			cv, err := c.value(v, 1)
			if err != nil {
				return nil, err
			}
			rec[types.String(name)] = cv
		}
	}
	return types.NewRecord(rec), nil
}

// Lists decides whether a listing shows the tool to the principal: list is
// allowed, and a call could be, with some arguments (a tool whose every
// call is forbidden is not shown). via and now are the listing's.
func (e *Engine) Lists(p *Principal, r *Resource, via string, now time.Time) bool {
	req := Request{Action: List, Principal: p, Resource: r, Via: via, Time: now}
	if !e.Decide(&req).Allowed {
		return false
	}
	req.Action = Call
	return e.decide(e.maybeCall, &req, false).Allowed
}

// Load reads and checks the configured policies (read reads a file:
// os.ReadFile). Every problem is reported, each at its file, line and
// column.
func Load(cfg Config, read func(string) ([]byte, error)) (*Engine, error) {
	sch, err := loadSchema(cfg.Schema, read)
	if err != nil {
		return nil, err
	}
	e := &Engine{byAction: map[Action]*index{}, maybeCall: &index{}, names: map[string]bool{}, info: map[types.PolicyID]policyInfo{},
		named: map[types.String]bool{}, byAttributes: true, classes: classes{m: map[string]int{}}}
	for _, a := range Actions {
		e.byAction[a] = &index{}
	}
	var errs []error
	seen := map[types.PolicyID]string{}
	for _, file := range cfg.Files {
		doc, err := read(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy.files: %w", err))
			continue
		}
		list, err := cedar.NewPolicyListFromBytes(file, doc)
		if err != nil {
			errs = append(errs, parseError(file, err))
			continue
		}
		for _, p := range list {
			id, where := policyID(p), at(p.Position())
			if first, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s: the policy id %q is taken by the policy at %s; every @id must be unique", where, id, first))
				continue
			}
			seen[id] = where
			if err := sch.check(string(id), p); err != nil {
				errs = append(errs, fmt.Errorf("%s: policy %q: %w", where, id, err))
				continue
			}
			e.add(id, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// parseAt finds the place in cedar-go's parse errors ("parser error:
// parse error at <input>:2:25 ...").
var parseAt = regexp.MustCompile(`^(?:parser error: )?parse error at (\S+?):(\d+):(\d+):? (.*)$`)

// parseError says a file's parse error as file:line:column: message.
func parseError(file string, err error) error {
	msg := strings.ReplaceAll(err.Error(), "<input>", file)
	if m := parseAt.FindStringSubmatch(msg); m != nil && strings.HasSuffix(m[1], file) {
		return fmt.Errorf("%s:%s:%s: the policy does not parse: %s", file, m[2], m[3], m[4])
	}
	return fmt.Errorf("%s: the policies do not parse: %s", file, msg)
}

// policyID is a policy's @id, or its place in its file.
func policyID(p *cedar.Policy) types.PolicyID {
	if id, ok := p.Annotations()["id"]; ok && id != "" {
		return types.PolicyID(id)
	}
	return types.PolicyID(at(p.Position()))
}

func at(pos types.Position) string {
	return fmt.Sprintf("%s:%d:%d", pos.Filename, pos.Line, pos.Column)
}

// add indexes a checked policy under every action it may apply to.
func (e *Engine) add(id types.PolicyID, p *cedar.Policy) {
	e.count++
	e.info[id] = policyInfo{effect: p.Effect()}
	ast := (*xast.Policy)(p.AST())
	tool, named := toolOf(ast.Resource)
	reads := policyReadsArguments(ast)
	for _, c := range ast.Conditions {
		if !argumentNames(c.Body, e.names) {
			e.all = true
		}
	}
	for _, a := range actionsOf(ast.Action) {
		if a == List || a == Call {
			e.listingReads(ast)
		}
		e.byAction[a].add(entry{id, p}, tool, named, reads)
		if a != Call {
			continue
		}
		relaxed := p
		if reads {
			relaxed = cedar.NewPolicyFromAST(castPolicy(withoutArguments(ast, p.Effect() == types.Permit)))
		}
		e.maybeCall.add(entry{id, relaxed}, tool, named, false)
	}
}

// actionsOf lists the actions an action scope admits. toold's actions form
// no groups, so "in" names the action itself.
func actionsOf(scope xast.IsActionScopeNode) []Action {
	var uids []types.EntityUID
	switch s := scope.(type) {
	case xast.ScopeTypeAll:
		return Actions
	case xast.ScopeTypeEq:
		uids = []types.EntityUID{s.Entity}
	case xast.ScopeTypeIn:
		uids = []types.EntityUID{s.Entity}
	case xast.ScopeTypeInSet:
		uids = s.Entities
	}
	var out []Action
	for _, u := range uids {
		if u.Type == TypeAction && slices.Contains(Actions, Action(u.ID)) {
			out = append(out, Action(u.ID))
		}
	}
	return out
}

// toolOf names the one tool a resource scope admits, if it names one.
func toolOf(scope xast.IsResourceScopeNode) (types.String, bool) {
	switch s := scope.(type) {
	case xast.ScopeTypeEq:
		return s.Entity.ID, s.Entity.Type == TypeTool
	case xast.ScopeTypeIn: // a tool has no parents: in is ==
		return s.Entity.ID, s.Entity.Type == TypeTool
	}
	return "", false
}
