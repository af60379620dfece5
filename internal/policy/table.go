package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/strictjson"
)

// Table is a YAML table of requests and the decisions expected of them
// (toold policy test): a policy change is reviewed like code, with the
// table beside it.
//
//	tests:
//	  - name: deployers deploy to staging
//	    principal: {user: "https://idp.example.com/|alice", groups: [deployers]}
//	    action: call
//	    tool: {name: deploy, kind: system_command, destructive: true}
//	    arguments: {env: staging}
//	    expect: allow
//	  - name: not to production
//	    principal: {user: "https://idp.example.com/|alice", groups: [deployers]}
//	    tool: {name: deploy, kind: system_command, destructive: true}
//	    arguments: {env: production}
//	    expect: deny
//	    policies: [staging only]
type Table struct {
	Tests []Case `yaml:"tests"`
}

// Case is one request and what the policies must decide of it.
type Case struct {
	Name      string         `yaml:"name"`
	Principal TablePrincipal `yaml:"principal"`
	// Action defaults to call.
	Action Action    `yaml:"action"`
	Tool   TableTool `yaml:"tool"`
	// Arguments are the call's (call and approve), as JSON would carry
	// them.
	Arguments any `yaml:"arguments"`
	// Via defaults to rest; Time to now.
	Via  string    `yaml:"via"`
	Time time.Time `yaml:"time"`
	// Expect is allow or deny.
	Expect string `yaml:"expect"`
	// Policies, when given, are the ids that must have decided.
	Policies []string `yaml:"policies"`
}

// TablePrincipal names who asks: exactly one of User ("<issuer>|<sub>"),
// Key and Local.
type TablePrincipal struct {
	User     string   `yaml:"user"`
	Groups   []string `yaml:"groups"`
	ClientID string   `yaml:"client_id"`
	Key      string   `yaml:"key"`
	Local    bool     `yaml:"local"`
}

// TableTool is the tool's attributes, as toold::Tool has them.
type TableTool struct {
	Name        string   `yaml:"name"`
	Kind        string   `yaml:"kind"`
	Server      string   `yaml:"server"`
	ReadOnly    bool     `yaml:"read_only"`
	Destructive bool     `yaml:"destructive"`
	Toolsets    []string `yaml:"toolsets"`
}

// ParseTable reads a table strictly: an unknown field is an error.
func ParseTable(data []byte) (*Table, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var t Table
	if err := dec.Decode(&t); err != nil && err != io.EOF {
		return nil, fmt.Errorf("the table: %w", err)
	}
	for i := range t.Tests {
		if err := t.Tests[i].check(); err != nil {
			return nil, fmt.Errorf("tests[%d] (%s): %w", i, t.Tests[i].Name, err)
		}
	}
	return &t, nil
}

func (c *Case) check() error {
	p := c.Principal
	n := 0
	for _, set := range []bool{p.User != "", p.Key != "", p.Local} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return fmt.Errorf("principal: give exactly one of user, key and local")
	case p.User != "" && !strings.Contains(p.User, "|"):
		return fmt.Errorf("principal.user: %q is not <issuer>|<sub>", p.User)
	case c.Action != "" && !slices.Contains(Actions, c.Action):
		return fmt.Errorf("action: %q is not one of list, call, approve, observe", c.Action)
	case c.Tool.Name == "":
		return fmt.Errorf("tool.name is missing")
	case c.Via != "" && !slices.Contains(Vias, c.Via):
		return fmt.Errorf("via: %q is not one of %s", c.Via, strings.Join(Vias, ", "))
	case c.Expect != "allow" && c.Expect != "deny":
		return fmt.Errorf("expect: %q is not allow or deny", c.Expect)
	}
	return nil
}

// identity is the case's principal as toold authenticates one.
func (p TablePrincipal) identity() *auth.Identity {
	switch {
	case p.Key != "":
		return &auth.Identity{Kind: auth.KindKey, Name: p.Key}
	case p.User != "":
		iss, sub, _ := strings.Cut(p.User, "|")
		return &auth.Identity{Kind: auth.KindToken, Issuer: iss, Subject: sub, Name: auth.TokenName(iss, sub),
			Groups: p.Groups, Client: p.ClientID}
	}
	return nil
}

// Result is one case's outcome.
type Result struct {
	Case *Case
	Got  Decision
	// Problem says how the decision differs from the expected one;
	// empty when it passed.
	Problem string
}

// Run decides every case of the table.
func (e *Engine) Run(t *Table, now time.Time) ([]Result, error) {
	out := make([]Result, 0, len(t.Tests))
	for i := range t.Tests {
		c := &t.Tests[i]
		args, err := jsonTree(c.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tests[%d] (%s): arguments: %w", i, c.Name, err)
		}
		r := &Request{Action: c.Action, Principal: NewPrincipal(c.Principal.identity()), Resource: NewResource(Tool(c.Tool)),
			Arguments: args, Via: c.Via, Time: c.Time}
		if r.Action == "" {
			r.Action = Call
		}
		if r.Via == "" {
			r.Via = ViaREST
		}
		if r.Time.IsZero() {
			r.Time = now
		}
		d := e.Decide(r)
		res := Result{Case: c, Got: d}
		want := c.Expect == "allow"
		switch {
		case d.Allowed != want:
			res.Problem = fmt.Sprintf("%s, want %s", describe(d), c.Expect)
		case c.Policies != nil && !slices.Equal(sortedUnique(slices.Clone(c.Policies)), d.Policies):
			res.Problem = fmt.Sprintf("%s, want it decided by %q", describe(d), c.Policies)
		}
		out = append(out, res)
	}
	return out, nil
}

// describe says a decision in a line.
func describe(d Decision) string {
	verb := "deny"
	if d.Allowed {
		verb = "allow"
	}
	switch {
	case d.Err != nil:
		return fmt.Sprintf("deny (%v)", d.Err)
	case len(d.Policies) == 0:
		return verb + " (no policy applies)"
	}
	return fmt.Sprintf("%s by %q", verb, d.Policies)
}

// Describe says a decision in a line, as toold policy test prints it.
func Describe(d Decision) string { return describe(d) }

// jsonTree is a YAML value as strictjson decodes the same JSON: what a
// call's arguments are when the policy sees them.
func jsonTree(v any) (any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return strictjson.Decode(raw, 2*MaxArgumentDepth)
}
