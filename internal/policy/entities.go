package policy

import (
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/toold/toold/internal/auth"
)

// The entity types and actions of toold's schema (toold.cedarschema).
const (
	TypeUser   types.EntityType = "toold::User"
	TypeKey    types.EntityType = "toold::Key"
	TypeLocal  types.EntityType = "toold::Local"
	TypeTool   types.EntityType = "toold::Tool"
	TypeAction types.EntityType = "toold::Action"
)

// Action is what a principal asks to do with a tool.
type Action string

// The actions.
const (
	// List: the tool is shown in the principal's listings and searches.
	List Action = "list"
	// Call: the tool runs with the call's arguments.
	Call Action = "call"
	// Approve: the principal decides on a call of the tool waiting for a
	// person.
	Approve Action = "approve"
	// Observe: the tool's calls are shown in the principal's activity
	// stream.
	Observe Action = "observe"
)

// Actions lists every action.
var Actions = []Action{List, Call, Approve, Observe}

// The ways in a request comes by (context.via).
const (
	ViaREST      = "rest"
	ViaMCP       = "mcp"
	ViaBatch     = "batch"
	ViaExecution = "execution"
	ViaConsole   = "console"
)

// Vias lists every way in.
var Vias = []string{ViaREST, ViaMCP, ViaBatch, ViaExecution, ViaConsole}

func (a Action) uid() types.EntityUID { return types.NewEntityUID(TypeAction, types.String(a)) }

// Tool is what a policy knows of a tool (the resource, toold::Tool).
type Tool struct {
	Name string
	// Kind is the tool's category: direct, external_api, mcp,
	// system_command or subtask.
	Kind string
	// Server is the upstream MCP server of a hosted tool; empty for
	// every other (the attribute is absent then).
	Server      string
	ReadOnly    bool
	Destructive bool
	// Toolsets are the configured toolsets that hold the tool.
	Toolsets []string
}

// Resource is a tool as the engine decides on it: built once per tool (a
// registry snapshot keeps it with the tool), so a decision builds nothing
// of it.
type Resource struct {
	entity types.Entity
	// The classes of tools a listing decides alike (listing.go): this
	// tool alone (its name and attributes), or every tool with these
	// attributes.
	nameClass, attrClass string
	class                atomic.Pointer[resourceClass] // its number in the engine that last asked
}

// NewResource builds the resource of a tool.
func NewResource(t Tool) *Resource {
	sets := make([]types.Value, 0, len(t.Toolsets))
	for _, s := range t.Toolsets {
		sets = append(sets, types.String(s))
	}
	attrs := types.RecordMap{
		"kind":        types.String(t.Kind),
		"read_only":   types.Boolean(t.ReadOnly),
		"destructive": types.Boolean(t.Destructive),
		"toolsets":    types.NewSet(sets...),
	}
	if t.Server != "" {
		attrs["server"] = types.String(t.Server)
	}
	attr := attrClass(t)
	// A tool named alone is still told apart by its attributes: a new
	// snapshot may serve the same name with others (a hosted tool whose
	// annotations changed, a toolset that took it in).
	return &Resource{entity: types.Entity{UID: types.NewEntityUID(TypeTool, types.String(t.Name)), Attributes: types.NewRecord(attrs)},
		nameClass: "n" + strconv.Itoa(len(t.Name)) + ":" + t.Name + attr, attrClass: attr}
}

// attrClass names a tool's attributes, as the resource has them: two tools
// with the same class have the same attributes. Each part is length
// prefixed; the toolsets are a set.
func attrClass(t Tool) string {
	b := []byte{'a'}
	part := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	part(t.Kind)
	part(t.Server) // empty: absent, as NewResource leaves it
	b = strconv.AppendBool(append(strconv.AppendBool(b, t.ReadOnly), ','), t.Destructive)
	sets := slices.Clone(t.Toolsets)
	slices.Sort(sets)
	for _, s := range slices.Compact(sets) {
		part(s)
	}
	return string(b)
}

// Name is the tool's name.
func (r *Resource) Name() string { return string(r.entity.UID.ID) }

// Principal is who a request is for, as an entity. Build it once per
// request with NewPrincipal (a listing decides on every tool with one).
// Its attributes are built when a policy first reads them: most decisions
// never do. Not for concurrent use.
type Principal struct {
	entity types.Entity
	id     *auth.Identity // a user's, until its attributes are built
}

// LocalID is the id of the one local caller (toold::Local::"local").
const LocalID = "local"

// NewPrincipal is the entity of an identity: a token's subject is
// toold::User::"<issuer>|<sub>" with its groups and client_id, a key's
// holder toold::Key::"<name>", and nil (a toold without credentials) or
// the anonymous caller toold::Local::"local".
func NewPrincipal(id *auth.Identity) *Principal {
	switch {
	case id == nil || id.Kind == auth.KindAnonymous:
		return &Principal{entity: types.Entity{UID: types.NewEntityUID(TypeLocal, LocalID)}}
	case id.Kind == auth.KindKey:
		return &Principal{entity: types.Entity{UID: types.NewEntityUID(TypeKey, types.String(id.Name))}}
	}
	return &Principal{entity: types.Entity{UID: types.NewEntityUID(TypeUser, types.String(id.Issuer+"|"+id.Subject))}, id: id}
}

// resolved is the principal's entity with its attributes.
func (p *Principal) resolved() *types.Entity {
	if id := p.id; id != nil {
		groups := make([]types.Value, 0, len(id.Groups))
		for _, g := range id.Groups {
			groups = append(groups, types.String(g))
		}
		p.entity.Attributes = types.NewRecord(types.RecordMap{"groups": types.NewSet(groups...), "client_id": types.String(id.Client)})
		p.id = nil
	}
	return &p.entity
}

// UID is the principal's entity id, as policies name it.
func (p *Principal) UID() types.EntityUID { return p.entity.UID }

// pair is the entities of one request: its principal and its tool. A
// request names no other entity, and no entity has parents, so a lookup
// is a comparison.
type pair struct {
	p *Principal
	r *types.Entity
}

func (e pair) Get(uid types.EntityUID) (types.Entity, bool) {
	switch uid {
	case e.p.entity.UID:
		return *e.p.resolved(), true
	case e.r.UID:
		return *e.r, true
	}
	return types.Entity{}, false
}

var _ types.EntityGetter = pair{}
