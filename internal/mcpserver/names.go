package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/registry"
)

// Names. MCP clients see each tool under its function name
// (registry.FunctionName: everything.echo is everything__echo), the one
// rendering of a name for the outside, which the hosts accept; the SDK
// serves the tool under that name. The canonical name stays an alias, as
// on every REST route: a tools/call naming it is renamed before the SDK
// looks the tool up (aliased), and the fast path resolves it the same way.
// The pipeline, keys' allow-lists, metrics and envelopes see the canonical
// name only.

// entry is the tool a client names, by its MCP name or its canonical one;
// nil when toold serves no such tool.
func (s *Server) entry(name string) *registry.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[name]
}

// aliased renames a tools/call that names a tool by its canonical name to
// the name the SDK serves it as; any other request passes as it came.
func (s *Server) aliased(method string, req mcp.Request) {
	if method != "tools/call" {
		return
	}
	cr, ok := req.(*mcp.CallToolRequest)
	if !ok || cr.Params == nil {
		return
	}
	if e := s.entry(cr.Params.Name); e != nil {
		cr.Params.Name = e.FunctionName()
	}
}
