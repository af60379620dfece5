package upstream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// Tool integrity: each tool a pinned server lists is compared with the
// definition pinned for it (in the state store, so every replica agrees),
// and one that changed — or, with pin_new: review, one that is new — is
// held back: left out of the registry's snapshot, so no listing shows it
// and no call reaches it, whichever way in, until a person accepts it.

// Definition is a hosted tool's definition as its server lists it: what a
// pin covers (name, title, description, input and output schemas,
// annotations), in RFC 8785 canonical JSON, so two listings of the same
// definition are the same bytes whatever their order or spacing.
type Definition struct {
	// Tool is the tool's name on its server.
	Tool      string
	Canonical json.RawMessage
}

// Pinner keeps the pins (internal/pins over the state store).
type Pinner interface {
	// Admit checks a server's listed tools against their pins, pinning
	// what it sees for the first time as the server's policy says
	// (reviewNew: a new tool of a server pinned already waits for a
	// person), and returns the tools held back, by name on the server,
	// with the reason a call of one is told.
	Admit(ctx context.Context, server string, defs []Definition, reviewNew bool) (map[string]string, error)
}

// definition is t's definition in canonical form.
func definition(t *mcp.Tool) (Definition, error) {
	raw, err := json.Marshal(struct {
		Name         string               `json:"name"`
		Title        string               `json:"title,omitempty"`
		Description  string               `json:"description,omitempty"`
		InputSchema  any                  `json:"inputSchema,omitempty"`
		OutputSchema any                  `json:"outputSchema,omitempty"`
		Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
	}{t.Name, t.Title, t.Description, t.InputSchema, t.OutputSchema, t.Annotations})
	if err != nil {
		return Definition{}, fmt.Errorf("the definition of %q: %w", t.Name, err)
	}
	return Definition{Tool: t.Name, Canonical: append(json.RawMessage(nil), strictjson.Canonical(raw)...)}, nil
}

// pinned reports whether the server's tools are pinned (pin, default true).
func (c Config) pinned() bool { return c.Pin == nil || *c.Pin }

// admit holds back the listed tools whose definitions are not the pinned
// ones: it returns those served and the held ones by canonical name. Without
// a pinner, or for a server with pin: false, every tool is served.
func (s *server) admit(ctx context.Context, ts []*tool, defs []Definition) ([]tools.Tool, map[string]string, error) {
	out := make([]tools.Tool, 0, len(ts))
	p := s.m.opts.Pins
	if p == nil || !s.cfg.pinned() {
		for _, t := range ts {
			out = append(out, t)
		}
		return out, nil, nil
	}
	held, err := p.Admit(ctx, s.cfg.Name, defs, s.cfg.PinNew == PinNewReview)
	if err != nil {
		return nil, nil, fmt.Errorf("checking the tools' pins: %w", err)
	}
	byName := make(map[string]string, len(held))
	for _, t := range ts {
		if why, ok := held[t.upstream]; ok {
			byName[t.spec.Name] = why
			continue
		}
		out = append(out, t)
	}
	return out, byName, nil
}

// The values of pin_new.
const (
	PinNewAccept = "accept"
	PinNewReview = "review"
)

// Relist has the named server list its tools again now (a pin of its
// was decided on some replica); a server that is down lists them when it
// is back.
func (m *Manager) Relist(name string) {
	if s := m.named(name); s != nil {
		s.askRelist()
	}
}
