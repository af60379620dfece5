package upstream

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/tools"
)

// TestEffectiveAnnotations (issue 24, finding 6): confirm_destructive
// gates on what MCP's defaults make of a server's annotations — none at
// all, or none on destructiveHint, is destructive — and no tool is listed
// read-only and destructive at once.
func TestEffectiveAnnotations(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name     string
		a        *mcp.ToolAnnotations
		readOnly bool
		destr    bool
	}{
		{"no annotations", nil, false, true},
		{"empty annotations", &mcp.ToolAnnotations{}, false, true},
		{"a title only", &mcp.ToolAnnotations{Title: "Deploy"}, false, true},
		{"destructiveHint false", &mcp.ToolAnnotations{DestructiveHint: &no}, false, false},
		{"destructiveHint true", &mcp.ToolAnnotations{DestructiveHint: &yes}, false, true},
		{"read-only", &mcp.ToolAnnotations{ReadOnlyHint: true}, true, false},
		{"read-only, destructiveHint false", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, true, false},
		{"read-only and destructiveHint true: destructive", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, false, true},
	} {
		e := effects(c.a)
		if e.ReadOnly != c.readOnly || e.Destructive != c.destr {
			t.Errorf("%s: read_only %v destructive %v, want %v %v", c.name, e.ReadOnly, e.Destructive, c.readOnly, c.destr)
		}
		if e.ReadOnly && e.Destructive {
			t.Errorf("%s: listed read-only and destructive at once", c.name)
		}
		for policy, want := range map[string]tools.Confirmation{"": tools.ConfirmHuman, "human": tools.ConfirmHuman,
			"token": tools.ConfirmToken, "none": tools.ConfirmNone} {
			if !c.destr {
				want = tools.ConfirmNone
			}
			if got := confirmation(Config{ConfirmDestructive: policy}, "t", c.a); got != want {
				t.Errorf("%s, confirm_destructive %q: confirmation %q, want %q", c.name, policy, got, want)
			}
		}
	}
}
