package mcpserver

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/registry"
)

// toolsetServer is the MCP server of one toolset (/mcp/<toolset>): an SDK
// server of its own, whose list holds only the toolset's tools, so its
// tools/list, its calls and search_tools see the subset, and its clients
// hear notifications/tools/list_changed only when the subset changes.
type toolsetServer struct {
	set    *registry.Toolset
	sdk    *mcp.Server
	served map[string]*registry.Entry
}

// startToolsets builds a server per configured toolset and keeps each
// one's list in step with the registry.
func (s *Server) startToolsets() {
	s.toolsets = map[string]*toolsetServer{}
	for name, set := range s.opts.Toolsets {
		about := "This server offers the toolset " + name + ": " + set.Description
		if set.Description == "" {
			about = "This server offers the toolset " + name + "."
		}
		s.toolsets[name] = &toolsetServer{set: set, sdk: s.newSDK(about + " search_tools finds its tools by what they do."), served: map[string]*registry.Entry{}}
	}
	if len(s.toolsets) == 0 {
		return
	}
	s.syncToolsets(s.opts.Registry.Load())
	s.opts.Registry.Subscribe(s.syncToolsets)
}

func (s *Server) syncToolsets(r *registry.Registry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.toolsets {
		s.syncTools(ts.sdk, ts.served, r, ts.set.Contains)
	}
}

// ToolsetHandler serves the toolset named over Streamable HTTP, as
// Handler serves the whole catalog; false when no toolset has the name.
func (s *Server) ToolsetHandler(name string) (http.Handler, bool) {
	ts, ok := s.toolsets[name]
	if !ok {
		return nil, false
	}
	return s.handlerFor(ts.sdk, ts.set), true
}

type toolsetKey struct{}

func withToolset(ctx context.Context, set *registry.Toolset) context.Context {
	return context.WithValue(ctx, toolsetKey{}, set)
}

// allowed is the caller's view for a call: the key's tools, narrowed to
// the toolset the request came through.
func (s *Server) allowed(ctx context.Context, p *auth.Principal) func(string) bool {
	set, _ := ctx.Value(toolsetKey{}).(*registry.Toolset)
	if set == nil {
		return p.Allows
	}
	return func(tool string) bool {
		e, ok := s.opts.Registry.Load().Lookup(tool)
		return ok && set.Contains(e) && p.Allows(tool)
	}
}
